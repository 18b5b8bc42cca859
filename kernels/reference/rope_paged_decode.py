"""A decode step's attention from its q/k/v projection on: qk_norm_rope_kv_write (the optional q/k
norms, the rotary embedding, the new k and v into the paged cache) then paged_attention_decode, as one
op. One new token per request: q/k/v [B, H, D]. The reference is the two ops it replaces."""

from __future__ import annotations

import torch

from .paged_attention_decode import paged_attention_decode
from .qk_norm_rope_kv_write import qk_norm_rope_kv_write


def rope_paged_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                      inv_freq: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      slot_mapping: torch.Tensor, block_tables: torch.Tensor, context_lens: torch.Tensor,
                      scale: float, sliding_window: int | None = None, softcap: float | None = None,
                      sinks: torch.Tensor | None = None, scaling: float = 1.0, q_norm: torch.Tensor | None = None,
                      k_norm: torch.Tensor | None = None, eps: float = 1e-6, multiply_in_float32: bool = False,
                      rotary_dim: int | None = None) -> torch.Tensor:
    """Arguments as the two ops take them (context_lens count the new token). Returns [B, Hq, D]."""
    q = qk_norm_rope_kv_write(q, k, v, positions, inv_freq, k_cache, v_cache, slot_mapping, scaling, q_norm, k_norm,
                              eps, multiply_in_float32, rotary_dim)
    return paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale, sliding_window, softcap,
                                  sinks)
