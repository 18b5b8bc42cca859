"""Batched decode attention: one new query token per request over a paged KV cache, with GQA."""

from __future__ import annotations

import torch

from .paged_attention_prefill import softmax_with_sinks


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    sliding_window: int | None = None,
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """q [B, Hq, D]; k/v_cache [num_pages, page_size, Hkv, D]; block_tables [B, max_pages];
    context_lens [B] (the new token included, its K/V already written). Returns [B, Hq, D].

    All requests are gathered to the longest table at once and the tail is masked, which is what
    makes decode one batched computation instead of a loop. softcap and sinks as in
    `paged_attention_prefill`.
    """
    B, Hq, _ = q.shape
    num_pages, page_size, Hkv, _ = k_cache.shape
    rep = Hq // Hkv
    tables = block_tables.long().clamp(0, max(num_pages - 1, 0))  # unused entries may hold anything
    k = k_cache[tables].reshape(B, -1, Hkv, k_cache.shape[-1]).float()  # [B, max_pages * page_size, Hkv, D]
    v = v_cache[tables].reshape(B, -1, Hkv, v_cache.shape[-1]).float()
    qg = q.float().view(B, Hkv, rep, -1)
    scores = torch.einsum("bgrd,btgd->bgrt", qg, k) * scale
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    ctx = context_lens.to(q.device).long()[:, None]
    t = torch.arange(k.shape[1], device=q.device)[None, :]
    allowed = t < ctx
    if sliding_window is not None:
        allowed &= t >= ctx - sliding_window
    scores = scores.masked_fill(~allowed[:, None, None, :], float("-inf"))
    probs = softmax_with_sinks(scores, sinks, Hkv, rep)
    return torch.einsum("bgrt,btgd->bgrd", probs, v).reshape(B, Hq, -1).to(q.dtype)
