"""Causal attention for new tokens (prefill chunks, decode steps, or a mix) over a paged KV cache.

The new tokens' K/V must already be in the cache (kv_cache_write), so each request attends to its
whole context, cached prefix and new tokens alike, read through its block table. GQA: each group
of Hq / Hkv query heads shares one KV head. Requests are padded into groups and each group is one
batched computation; a group's padded score matrix is kept under `max_scores` elements so that
one long prompt next to short ones does not blow up memory.
"""

from __future__ import annotations

from typing import Sequence

import torch

from .varlen import int_tensor, pad_index

DEFAULT_MAX_SCORES = 1 << 26  # 64M float32 scores (256 MiB) per group


def gather_context(cache: torch.Tensor, pages: torch.Tensor, length: int) -> torch.Tensor:
    """The first `length` tokens of one request from cache [num_pages, page_size, Hkv, D]: [length, Hkv, D]."""
    return cache[pages.long()].reshape(-1, *cache.shape[2:])[:length]


def _groups(query_lens: Sequence[int], context_lens: Sequence[int], heads: int, max_scores: int) -> list[list[int]]:
    """Consecutive requests whose padded [group, heads, max q, max ctx] scores fit in max_scores."""
    groups: list[list[int]] = []
    current: list[int] = []
    qmax = kmax = 0
    for i, (q, c) in enumerate(zip(query_lens, context_lens)):
        nq, nk = max(qmax, q), max(kmax, c)
        if current and (len(current) + 1) * heads * nq * nk > max_scores:
            groups.append(current)
            current, nq, nk = [], q, c
        current.append(i)
        qmax, kmax = nq, nk
    if current:
        groups.append(current)
    return groups


def softmax_with_sinks(scores: torch.Tensor, sinks: torch.Tensor | None, hkv: int, rep: int) -> torch.Tensor:
    """Softmax over the last dim of scores [b, Hkv, rep, ..., k]; with sinks [Hkv * rep] each head's
    sink logit joins the denominator (as a key whose value is zero), then is dropped."""
    if sinks is None:
        return torch.softmax(scores, dim=-1)
    sink = sinks.float().view(1, hkv, rep, *([1] * (scores.dim() - 3)))
    sink = sink.expand(*scores.shape[:-1], 1)
    return torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]


def paged_attention_prefill(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_lens: Sequence[int],
    context_lens: Sequence[int],
    scale: float,
    sliding_window: int | None = None,
    max_scores: int = DEFAULT_MAX_SCORES,
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """q [T, Hq, D] (requests back to back), block_tables [B, max_pages] (entries past a request's
    pages may hold anything).

    Request i's new tokens sit at positions context_lens[i] - query_lens[i] ... context_lens[i] - 1.
    A token at position p sees positions <= p (and > p - sliding_window when set). Returns [T, Hq, D].
    softcap (Gemma 2): scores become softcap * tanh(scores / softcap) before the mask. sinks [Hq]
    (gpt-oss): one extra logit per head in the softmax's denominator that attends to nothing.
    """
    num_pages, page_size, Hkv, _ = k_cache.shape
    Hq = q.shape[1]
    rep = Hq // Hkv
    dev = q.device
    starts = [0]
    for n in query_lens:
        starts.append(starts[-1] + n)
    out = torch.empty(q.shape[0], Hq, v_cache.shape[-1], dtype=q.dtype, device=dev)
    for group in _groups(query_lens, context_lens, Hq, max_scores):
        qls = [query_lens[i] for i in group]
        cls = [context_lens[i] for i in group]
        kmax = max(cls)
        # A group is consecutive requests, so its tokens are one slice of the batch; token t of
        # the slice goes to row rows[t], column cols[t] of the padded queries.
        lo, hi = starts[group[0]], starts[group[-1] + 1]
        rows, cols, g, qmax = pad_index(starts[group[0] : group[-1] + 2], dev)
        qp = q.new_zeros(g, qmax, Hkv, rep, q.shape[-1]).float()
        qp[rows, cols] = q[lo:hi].float().view(-1, Hkv, rep, q.shape[-1])
        pages = -(-kmax // page_size)
        tables = block_tables[group[0] : group[-1] + 1, :pages].long().clamp(0, max(num_pages - 1, 0))
        k = k_cache[tables].reshape(g, pages * page_size, Hkv, -1)[:, :kmax].float()
        v = v_cache[tables].reshape(g, pages * page_size, Hkv, -1)[:, :kmax].float()
        scores = torch.einsum("bqgrd,bkgd->bgrqk", qp, k) * scale
        if softcap is not None:
            scores = softcap * torch.tanh(scores / softcap)
        ctx = int_tensor(cls, dev)[:, None]
        qlen = int_tensor(qls, dev)[:, None]
        j = torch.arange(qmax, device=dev)[None, :]
        # Padding rows take the last real position, so every row has something to attend to.
        q_pos = (ctx - qlen + torch.minimum(j, qlen - 1))[:, :, None]  # [g, qmax, 1]
        k_pos = torch.arange(kmax, device=dev)[None, None, :]
        allowed = k_pos <= q_pos
        if sliding_window is not None:
            allowed &= k_pos > q_pos - sliding_window
        scores = scores.masked_fill(~allowed[:, None, None], float("-inf"))
        probs = softmax_with_sinks(scores, sinks, Hkv, rep)
        ctx_out = torch.einsum("bgrqk,bkgd->bqgrd", probs, v)  # [g, qmax, Hkv, rep, Dv]
        out[lo:hi] = ctx_out[rows, cols].reshape(-1, Hq, v_cache.shape[-1]).to(q.dtype)
    return out
