"""Write new K/V into a paged cache at flat slots (page * page_size + offset)."""

from __future__ import annotations

import torch


def kv_cache_write(
    k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> None:
    """k_cache/v_cache [num_pages, page_size, Hkv, D] (written in place), slot_mapping [T], k/v [T, Hkv, D]."""
    flat_k = k_cache.view(-1, *k_cache.shape[2:])
    flat_v = v_cache.view(-1, *v_cache.shape[2:])
    flat_k.index_copy_(0, slot_mapping, k.to(k_cache.dtype))
    if v_cache is not k_cache or v is not k:  # MLA's latent pool: one vector, its own value, written once
        flat_v.index_copy_(0, slot_mapping, v.to(v_cache.dtype))
