"""Batched decode attention: one new query token per request over a paged KV cache, with GQA."""

from __future__ import annotations

import torch

from .paged_attention_prefill import softmax_with_sinks


def visible_positions(context_lens: torch.Tensor, length: int, sliding_window: int | None,
                      device) -> torch.Tensor:
    """[B, length] bool: which of each request's gathered positions its new token attends to (those
    before its context length, and within the window when there is one)."""
    ctx = context_lens.to(device).long()[:, None]
    t = torch.arange(length, device=device)[None, :]
    allowed = t < ctx
    if sliding_window is not None:
        allowed &= t >= ctx - sliding_window
    return allowed


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
    B, Hq, D = q.shape
    num_pages, page_size, Hkv, _ = k_cache.shape
    rep = Hq // Hkv
    tables = block_tables.long().clamp(0, max(num_pages - 1, 0))  # unused entries may hold anything
    # Gathered head-major, [Hkv, B, max_pages * page_size, D], so both products are one bmm each over
    # (KV head, request) with no transposed copy of K or V (the CPU engine's decode runs this).
    pages = tables.reshape(-1)
    k = k_cache.index_select(0, pages).view(B, -1, Hkv, D).permute(2, 0, 1, 3).reshape(Hkv * B, -1, D).float()
    v = v_cache.index_select(0, pages).view(B, -1, Hkv, D).permute(2, 0, 1, 3).reshape(Hkv * B, -1, D).float()
    qg = q.float().view(B, Hkv, rep, D).transpose(0, 1).reshape(Hkv * B, rep, D)
    scores = torch.bmm(qg, k.transpose(1, 2)).view(Hkv, B, rep, -1) * scale
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    allowed = visible_positions(context_lens, k.shape[1], sliding_window, q.device)
    scores = scores.masked_fill(~allowed[None, :, None, :], float("-inf"))
    probs = softmax_with_sinks(scores.transpose(0, 1), sinks, Hkv, rep).transpose(0, 1)  # sinks per (kv head, rep)
    out = torch.bmm(probs.reshape(Hkv * B, rep, -1), v)  # [Hkv * B, rep, D]
    return out.view(Hkv, B, rep, D).transpose(0, 1).reshape(B, Hq, D).to(q.dtype)
