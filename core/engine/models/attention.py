"""Paged attention as a model layer sees it: write the new K/V into the pool, attend through the block tables."""

from __future__ import annotations

import torch


def paged_attention(ops, batch, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                    sliding_window: int | None = None, *, softcap: float | None = None,
                    sinks: torch.Tensor | None = None) -> torch.Tensor:
    """q [T, Hq, D], k/v [T, Hkv, D] for the batch's new tokens. Returns [T, Hq, D].

    The pool is asked for this layer by its GLOBAL id, so a model/pool mismatch raises the pool's
    PoolLayerError naming the layers it holds. softcap (Gemma 2) and sinks (gpt-oss) reach the
    kernels only when set, so ops without them keep their plain signature.
    """
    extra = {}
    if softcap is not None:
        extra["softcap"] = softcap
    if sinks is not None:
        extra["sinks"] = sinks
    pool, tables, slots = batch.kv_for(layer_id)  # a sliding layer's K/V may live in the SWA pool
    if pool is None:
        raise RuntimeError(f"layer {layer_id} is an attention layer but the batch carries no KV pool")
    k_cache, v_cache = pool.k(layer_id), pool.v(layer_id)
    ops.kv_cache_write(k_cache, v_cache, slots, k, v)
    if batch.is_decode_only:
        return ops.paged_attention_decode(q, k_cache, v_cache, tables, batch.context_lens_on_device, scale,
                                          sliding_window, **extra)
    return ops.paged_attention_prefill(q, k_cache, v_cache, tables, batch.query_lens_list,
                                       batch.context_lens_list, scale, sliding_window, **extra)


def head_geometry(layer) -> tuple[int, int, int]:
    """(query heads, KV heads, head dim) of an attention layer, as its layer-map entry states them."""
    a = layer.attention
    return a.heads, a.kv_heads, a.head_dim


def window_of(layer) -> int | None:
    """The window of a sliding-attention layer (the map's), None for a full-attention one."""
    return layer.attention.window if layer.mixer == "sliding_attention" else None
