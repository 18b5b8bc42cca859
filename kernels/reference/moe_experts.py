"""Routed expert compute: each token through its chosen experts, summed with the routing weights."""

from __future__ import annotations

import torch

from .mlp import mlp


def moe_experts(
    x: torch.Tensor,
    weights: torch.Tensor,
    ids: torch.Tensor,
    up: torch.Tensor,
    down: torch.Tensor,
    gate: torch.Tensor | None = None,
    act: str = "relu2",
) -> torch.Tensor:
    """x [T, H]; weights/ids [T, k]; up [E, I, H], down [E, H, I], gate [E, I, H] or None (relu2
    experts have none; SwiGLU experts do). Returns [T, H] in x's dtype.

    The T*k (token, expert) assignments are sorted by expert so that each expert runs once on one
    contiguous block of its tokens; the results go back to their (token, slot) places and are
    summed with the weights, with no scatter-add.
    """
    T, k = ids.shape
    flat = ids.reshape(-1)
    order = flat.argsort(stable=True)
    counts = torch.bincount(flat, minlength=up.shape[0]).tolist()
    rows = x[order // k]
    out_sorted = torch.empty(T * k, down.shape[1], dtype=x.dtype, device=x.device)
    start = 0
    for e, n in enumerate(counts):
        if n:
            out_sorted[start : start + n] = mlp(rows[start : start + n], up[e], down[e], None if gate is None else gate[e], act)
            start += n
    out = torch.empty_like(out_sorted)
    out[order] = out_sorted
    return (out.view(T, k, -1).float() * weights[..., None].float()).sum(1).to(x.dtype)
