"""An attention layer's work between its q/k/v projection and the attention proper, as one op:
optional per-head RMSNorm of q and k (Qwen3, Gemma 3, LFM2), rotary embedding of both (half-split,
over the first `rotary_dim` channels of each head, cos/sin times `scaling` as gpt-oss's YaRN), and
the write of the new k and v into the paged cache. Returns q; k and v live in the cache.

The reference is the three ops it replaces, called as the models called them, so a fused kernel
tested against it gives what the unfused layer gave.
"""

from __future__ import annotations

import torch

from .kv_cache_write import kv_cache_write
from .rms_norm import rms_norm
from .rotary import apply_rotary


def qk_norm_rope_kv_write(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                          inv_freq: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                          slot_mapping: torch.Tensor, scaling: float = 1.0, q_norm: torch.Tensor | None = None,
                          k_norm: torch.Tensor | None = None, eps: float = 1e-6, multiply_in_float32: bool = False,
                          rotary_dim: int | None = None) -> torch.Tensor:
    """q [T, Hq, D], k/v [T, Hkv, D] (any strides: views of one q/k/v product), positions [T],
    inv_freq [R/2] with R = rotary_dim (None: D); q_norm/k_norm [D] or None (no norm); caches
    [pages, page_size, Hkv, D] written at slot_mapping [T]. Returns q normed and rotated, [T, Hq, D]."""
    if q_norm is not None:
        q = rms_norm(q, q_norm, eps, multiply_in_float32=multiply_in_float32)
    if k_norm is not None:
        k = rms_norm(k, k_norm, eps, multiply_in_float32=multiply_in_float32)
    q, k = (_rotate(x, positions, inv_freq, scaling, rotary_dim) for x in (q, k))
    kv_cache_write(k_cache, v_cache, slot_mapping, k, v)
    return q


def _rotate(x, positions, inv_freq, scaling, rotary_dim):
    if rotary_dim is None or rotary_dim == x.shape[-1]:
        return apply_rotary(x, positions, inv_freq, scaling)
    head, tail = x[..., :rotary_dim], x[..., rotary_dim:]
    return torch.cat([apply_rotary(head.contiguous(), positions, inv_freq, scaling), tail], dim=-1)
