"""Kimi Delta Attention through flash-linear-attention: `chunk_kda` for prompts (all sequences of a
batch in one varlen call, `cu_seqlens`) and `fused_recurrent_kda` for one decode token per request.
Same arguments and results as kernels/reference/kda.py.

fla wants [1, T, H, d] (sequence-first, batch of one with cu_seqlens), the decay g [1, T, Hv, dk]
in natural log as ours, and a float32 state [N, Hv, dk, dv], which is our pool's layout. Grouped
q/k heads are broadcast to the value heads first (always valid; fla 0.6 also takes them as they are).
"""

from __future__ import annotations

import torch
from fla.ops.kda import chunk_kda as _fla_chunk
from fla.ops.kda import fused_recurrent_kda as _fla_recurrent

from .gated_delta_rule import _per_value_head


def kda_chunk(q, k, v, g, beta, seq_starts, initial_states=None, scale=None, qk_l2norm=True):
    T, Hv, dv = v.shape
    dtype = v.dtype
    q, k = (_per_value_head(x.to(dtype), Hv) for x in (q, k))
    cu = torch.tensor(list(seq_starts), dtype=torch.long).to(v.device, non_blocking=True)
    h0 = None if initial_states is None else initial_states.float()
    o, final = _fla_chunk(q[None], k[None], v[None], g=g.float()[None], beta=beta.to(dtype)[None], scale=scale,
                          initial_state=h0, output_final_state=True, cu_seqlens=cu,
                          use_qk_l2norm_in_kernel=qk_l2norm)
    return o[0].to(dtype), final


def kda_recurrent_inplace(q, k, v, g, beta, states, slots, scale=None, qk_l2norm=True):
    B, Hv, dv = v.shape
    dtype = v.dtype
    q, k = (_per_value_head(x.to(dtype), Hv) for x in (q, k))
    cu = torch.arange(B + 1, dtype=torch.long, device=v.device)  # B sequences of one token each
    o, final = _fla_recurrent(q[None], k[None], v[None], g=g.float()[None], beta=beta.to(dtype)[None], scale=scale,
                              initial_state=states[slots].float(), output_final_state=True, cu_seqlens=cu,
                              use_qk_l2norm_in_kernel=qk_l2norm)
    states[slots] = final.to(states.dtype)
    return o[0].to(dtype)
