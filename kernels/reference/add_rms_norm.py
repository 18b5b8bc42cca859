"""Residual add fused with the next block's RMSNorm: h = hidden + delta; (h, rms_norm(h)).

`delta` may also be a MoE's parts, (shared [T, H], routed [T, H] or per assignment [T, k, H]):
then h = hidden + (shared + routed summed over k), rounded in that order, as the unfused model
adds them."""

from __future__ import annotations

import torch

from .rms_norm import rms_norm


def add_rms_norm(hidden: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor, eps: float, *,
                 multiply_in_float32: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden, delta [T, H] (delta None: nothing to add). Returns (h, normed) in hidden's dtype; h is
    rounded to that dtype before it is normalised, exactly as `hidden + delta` then `rms_norm`."""
    if isinstance(delta, tuple):
        shared, routed = delta
        delta = shared + (routed.sum(1) if routed.dim() == 3 else routed)
    h = hidden if delta is None else hidden + delta
    return h, rms_norm(h, weight, eps, multiply_in_float32=multiply_in_float32)
