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

    Loops over the experts that got tokens: each runs once on all its tokens.
    """
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in torch.unique(ids).tolist():
        token, slot = torch.where(ids == e)
        y = mlp(x[token], up[e], down[e], None if gate is None else gate[e], act)
        out.index_add_(0, token, y.float() * weights[token, slot, None].float())
    return out.to(x.dtype)
