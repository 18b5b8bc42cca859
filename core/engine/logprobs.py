"""Per-token logprobs for the requests that ask for them (OpenAI's `logprobs` / `top_logprobs`).

They are computed from the very logits `sampling.sample` reads, after the forward (or the decode
graph's replay) has produced them, so decode graphs stay as they are and a batch where nobody asks
pays nothing. Which logits: the model's float32 logits before temperature, top-k and top-p (the
distribution the model gives; for the greedy requests `bringup ab` sends it is exactly what the
argmax picked from). log_softmax runs in float32 whatever the model's dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .forward_batch import upload

MAX_TOP_LOGPROBS = 20  # OpenAI's cap on top_logprobs (and on completions' integer logprobs)


@dataclass(frozen=True)
class TokenLogprob:
    """One sampled token: its logprob and the top alternatives at its position, best first."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...]  # (token id, logprob), len = the request's `logprobs`


def wanted_rows(params: list) -> list[int]:
    """Rows of a sampled batch whose requests ask for logprobs (None = not asked; 0 = the chosen token only)."""
    return [i for i, p in enumerate(params) if p.logprobs is not None]


def compute(logits: torch.Tensor, tokens: torch.Tensor, rows: list[int], counts: list[int]):
    """On the device: for `rows` of `logits` [B, vocab], the chosen tokens' logprobs [R] and the top
    max(counts) ids and logprobs [R, N] (float32). Nothing is read to the host here."""
    idx = upload([rows], logits.device)[0] if len(rows) != logits.shape[0] else None
    sub = logits if idx is None else logits.index_select(0, idx)
    chosen = tokens if idx is None else tokens.index_select(0, idx)
    logp = torch.log_softmax(sub.float(), dim=-1)
    own = logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    n = min(max(counts), logp.shape[-1])
    top = logp.topk(n, dim=-1) if n > 0 else None
    return chosen, own, (top.indices if top else None), (top.values if top else None)


def to_host(parts, counts: list[int]) -> list[TokenLogprob]:
    """The device tensors of `compute` as one TokenLogprob per row (one host read per tensor)."""
    chosen, own, ids, values = parts
    chosen, own = chosen.tolist(), own.tolist()
    ids = ids.tolist() if ids is not None else [[] for _ in chosen]
    values = values.tolist() if values is not None else [[] for _ in chosen]
    return [TokenLogprob(int(t), float(lp), tuple(zip(i[:k], v[:k]))) for t, lp, i, v, k
            in zip(chosen, own, ids, values, counts)]
