"""Causal attention for new tokens (prefill chunks, decode steps, or a mix) over a paged KV cache.

The new tokens' K/V must already be in the cache (kv_cache_write), so each request attends to its
whole context, cached prefix and new tokens alike, read through its block table. GQA: each group
of Hq / Hkv query heads shares one KV head.
"""

from __future__ import annotations

from typing import Sequence

import torch


def gather_context(cache: torch.Tensor, pages: torch.Tensor, length: int) -> torch.Tensor:
    """The first `length` tokens of one request from cache [num_pages, page_size, Hkv, D]: [length, Hkv, D]."""
    return cache[pages.long()].reshape(-1, *cache.shape[2:])[:length]


def paged_attention_prefill(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_lens: Sequence[int],
    context_lens: Sequence[int],
    scale: float,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """q [T, Hq, D] (requests back to back), block_tables [B, max_pages].

    Request i's new tokens sit at positions context_lens[i] - query_lens[i] ... context_lens[i] - 1.
    A token at position p sees positions <= p (and > p - sliding_window when set). Returns [T, Hq, D].
    """
    page_size = k_cache.shape[1]
    Hq, Hkv = q.shape[1], k_cache.shape[2]
    rep = Hq // Hkv
    out = torch.empty(q.shape[0], Hq, v_cache.shape[-1], dtype=q.dtype, device=q.device)
    start = 0
    for i, (qlen, ctx) in enumerate(zip(query_lens, context_lens)):
        pages = block_tables[i, : -(-ctx // page_size)]
        k = gather_context(k_cache, pages, ctx).float()  # [ctx, Hkv, D]
        v = gather_context(v_cache, pages, ctx).float()
        qi = q[start : start + qlen].float().view(qlen, Hkv, rep, -1)
        scores = torch.einsum("qgrd,kgd->grqk", qi, k) * scale
        q_pos = torch.arange(ctx - qlen, ctx, device=q.device)[:, None]
        k_pos = torch.arange(ctx, device=q.device)[None, :]
        allowed = k_pos <= q_pos
        if sliding_window is not None:
            allowed &= k_pos > q_pos - sliding_window
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out[start : start + qlen] = torch.einsum("grqk,kgd->qgrd", probs, v).reshape(qlen, Hq, -1).to(q.dtype)
        start += qlen
    return out
