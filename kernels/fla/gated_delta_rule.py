"""The gated delta rule through flash-linear-attention: `chunk_gated_delta_rule` for prompts (all
sequences of a batch in one varlen call, `cu_seqlens`) and `fused_recurrent_gated_delta_rule` for
one decode token per request. Same arguments and results as kernels/reference/gated_delta_rule.py.

fla wants [1, T, H, d] (sequence-first, batch of one with cu_seqlens), one q/k head per value head
(so grouped q/k heads are broadcast first), and a state [N, H, dk, dv], which is our pool's layout.
Its g is the natural-log decay, as ours. States come back float32.
"""

from __future__ import annotations

import torch
from fla.ops.gated_delta_rule import chunk_gated_delta_rule as _fla_chunk
from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as _fla_recurrent


def _per_value_head(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[T, Hk, d] -> [T, Hv, d], value head h reading key head h // (Hv // Hk) (repeat_interleave)."""
    T, Hk, d = x.shape
    if Hk == heads:
        return x
    return x[:, :, None, :].expand(T, Hk, heads // Hk, d).reshape(T, heads, d)


def gated_delta_rule_chunk(q, k, v, g, beta, seq_starts, initial_states=None, scale=None, qk_l2norm=True):
    T, Hv, dv = v.shape
    dtype = v.dtype
    q, k = (_per_value_head(x.to(dtype), Hv) for x in (q, k))
    cu = torch.tensor(list(seq_starts), dtype=torch.int32).to(v.device, non_blocking=True)
    h0 = None if initial_states is None else initial_states.float()
    o, final = _fla_chunk(q[None], k[None], v[None], g=g.float()[None], beta=beta.to(dtype)[None], scale=scale,
                          initial_state=h0, output_final_state=True, cu_seqlens=cu,
                          use_qk_l2norm_in_kernel=qk_l2norm)
    return o[0].to(dtype), final


def gated_delta_rule_recurrent_inplace(q, k, v, g, beta, states, slots, scale=None, qk_l2norm=True):
    B, Hv, dv = v.shape
    dtype = v.dtype
    q, k = (_per_value_head(x.to(dtype), Hv) for x in (q, k))
    # B sequences of one token each: batch of one, cu_seqlens 0..B.
    cu = torch.arange(B + 1, dtype=torch.int32, device=v.device)
    o, final = _fla_recurrent(q[None], k[None], v[None], g=g.float()[None], beta=beta.to(dtype)[None], scale=scale,
                              initial_state=states[slots].float(), output_final_state=True, cu_seqlens=cu,
                              use_qk_l2norm_in_kernel=qk_l2norm)
    states[slots] = final.to(states.dtype)
    return o[0].to(dtype)
