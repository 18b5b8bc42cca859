"""Lightning attention's prompts through flash-linear-attention: `chunk_simple_gla` with a constant
log decay per head (g_gamma = -slope) and no scale, all sequences of a batch in one varlen call
(`cu_seqlens`). Same arguments and results as kernels/reference/lightning_attention.py's
`lightning_attention_chunk` (fla's own `chunk_lightning_attn` derives the slopes from the layer index
with another formula, so the slopes are passed here as the model computes them). States come back float32.
"""

from __future__ import annotations

import torch
from fla.ops.simple_gla import chunk_simple_gla as _fla_chunk


def lightning_attention_chunk(q, k, v, slopes, seq_starts, initial_states=None):
    dtype = v.dtype
    cu = torch.tensor(list(seq_starts), dtype=torch.int32).to(v.device, non_blocking=True)
    h0 = None if initial_states is None else initial_states.float()
    g_gamma = -slopes.to(device=v.device, dtype=torch.float32)
    o, final = _fla_chunk(q.to(dtype)[None], k.to(dtype)[None], v[None], scale=1.0, g_gamma=g_gamma,
                          initial_state=h0, output_final_state=True, cu_seqlens=cu)
    return o[0].to(dtype), final
