"""Write new K/V into a paged cache on the CPU: the reference's values, indexed by (page, offset).

kernels/reference/kv_cache_write.py copies rows into a flat [pages * page_size, Hkv, D] view of the
cache. Inside a compiled decode step (core/engine/cpu_compiled_decode.py) torch 2.11's inductor
turns that write through a view into a copy of the layer's whole cache and back (6.5 and 3.1 ms per
attention layer at the device host's pool size, against 0.1 ms for the step's other fused loops);
a write indexed on the cache tensor itself is done in place by every torch version. Eager steps
cost the same either way.
"""

from __future__ import annotations

import torch


def kv_cache_write(k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor, k: torch.Tensor,
                   v: torch.Tensor) -> None:
    """As the reference: k_cache/v_cache [num_pages, page_size, Hkv, D] written in place at the flat
    slots slot_mapping [T] (page * page_size + offset); k/v [T, Hkv, D]."""
    page_size = k_cache.shape[1]
    index = (slot_mapping // page_size, slot_mapping % page_size)
    k_cache.index_put_(index, k.to(k_cache.dtype))
    v_cache.index_put_(index, v.to(v_cache.dtype))
