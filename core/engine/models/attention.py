"""Paged attention as a model layer sees it: write the new K/V into the pool, attend through the block tables
(rotary_attention: q/k norms and the rotary embedding first, fused with the write where the device can,
and at decode with the attention too)."""

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
    k_cache, v_cache, tables, slots = _cache_of(batch, layer_id)
    ops.kv_cache_write(k_cache, v_cache, slots, k, v)
    return _attend(ops, batch, q, k_cache, v_cache, tables, scale, sliding_window, extra)


def rotary_attention(ops, batch, layer_id: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     inv_freq: torch.Tensor, scale: float, sliding_window: int | None = None, *,
                     scaling: float = 1.0, q_norm=None, k_norm=None, norm_in_float32: bool = False,
                     softcap: float | None = None, sinks: torch.Tensor | None = None,
                     rotary_dim: int | None = None) -> torch.Tensor:
    """paged_attention of q and k after their optional per-head RMSNorms (q_norm / k_norm: modules with
    `weight` and `eps`, or None) and the rotary embedding (cos/sin times `scaling`) of the first
    `rotary_dim` channels of each head (None: all; Qwen3-Next turns a quarter). Where the device has
    a fused qk_norm_rope_kv_write (one Triton launch for norms, rotary and the cache write, in place of
    about thirty kernels), it is used, and in a decode-only batch where the device has rope_paged_decode,
    that one launch does the attention too; elsewhere the ops one by one, as the layers always called them."""
    names = getattr(ops, "implementations", {})
    if batch.is_decode_only and names.get("rope_paged_decode", "reference") != "reference":
        k_cache, v_cache, tables, slots = _cache_of(batch, layer_id)
        norm = q_norm if q_norm is not None else k_norm
        return ops.rope_paged_decode(q, k, v, batch.positions, inv_freq, k_cache, v_cache, slots, tables,
                                     batch.context_lens_on_device, scale, sliding_window, softcap, sinks, scaling,
                                     None if q_norm is None else q_norm.weight,
                                     None if k_norm is None else k_norm.weight,
                                     norm.eps if norm is not None else 1e-6, norm_in_float32, rotary_dim)
    if names.get("qk_norm_rope_kv_write", "reference") == "reference":
        if q_norm is not None:
            q = ops.rms_norm(q, q_norm.weight, q_norm.eps, multiply_in_float32=norm_in_float32)
        if k_norm is not None:
            k = ops.rms_norm(k, k_norm.weight, k_norm.eps, multiply_in_float32=norm_in_float32)
        q = _rotate(ops, q, batch.positions, inv_freq, scaling, rotary_dim)
        k = _rotate(ops, k, batch.positions, inv_freq, scaling, rotary_dim)
        return paged_attention(ops, batch, layer_id, q, k, v, scale, sliding_window, softcap=softcap, sinks=sinks)
    k_cache, v_cache, tables, slots = _cache_of(batch, layer_id)
    norm = q_norm if q_norm is not None else k_norm
    eps = norm.eps if norm is not None else 1e-6  # the models give q and k one epsilon
    q = ops.qk_norm_rope_kv_write(q, k, v, batch.positions, inv_freq, k_cache, v_cache, slots, scaling,
                                  None if q_norm is None else q_norm.weight, None if k_norm is None else k_norm.weight,
                                  eps, norm_in_float32, rotary_dim)
    extra = {key: val for key, val in (("softcap", softcap), ("sinks", sinks)) if val is not None}
    return _attend(ops, batch, q, k_cache, v_cache, tables, scale, sliding_window, extra)


def _rotate(ops, x, positions, inv_freq, scaling, rotary_dim):
    """ops.apply_rotary of x's first rotary_dim channels per head, the rest as they are."""
    if rotary_dim is None or rotary_dim == x.shape[-1]:
        return ops.apply_rotary(x, positions, inv_freq, scaling)
    return torch.cat([ops.apply_rotary(x[..., :rotary_dim], positions, inv_freq, scaling), x[..., rotary_dim:]], dim=-1)


def _cache_of(batch, layer_id: int):
    """(k cache, v cache, block tables, slot mapping) of the layer, by its GLOBAL id."""
    pool, tables, slots = batch.kv_for(layer_id)  # a sliding layer's K/V may live in the SWA pool
    if pool is None:
        raise RuntimeError(f"layer {layer_id} is an attention layer but the batch carries no KV pool")
    return pool.k(layer_id), pool.v(layer_id), tables, slots


def _attend(ops, batch, q, k_cache, v_cache, tables, scale, sliding_window, extra):
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
