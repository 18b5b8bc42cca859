"""Residual add fused with the next block's RMSNorm: h = hidden + delta; (h, rms_norm(h)).

`delta` may also be a MoE's parts, (shared [T, H] or slices [T, S, H], routed [T, H] or per
assignment [T, k, H]): then h = hidden + (shared + routed summed over k), rounded in that order, as
the unfused model adds them (shared slices are summed in float32 and rounded first). shared is None
for a MoE without a shared expert (gpt-oss, Qwen3-MoE): h = hidden + routed summed over k. A third
part, the shared expert's gate logits [T, 1] (Qwen3-Next), scales shared by sigmoid(gate) first,
each rounded as the unfused model rounds them."""

from __future__ import annotations

import torch

from .rms_norm import rms_norm


def moe_sum(shared: torch.Tensor, routed: torch.Tensor, shared_gate: torch.Tensor | None = None) -> torch.Tensor:
    """[T, H]: a MoE's shared part (or its S slices [T, S, H], or None: no shared expert), times
    sigmoid(shared_gate [T, 1]) where given, plus its routed part (or per-assignment parts [T, k, H])."""
    routed = routed.sum(1) if routed.dim() == 3 else routed
    if shared is None:
        return routed
    if shared.dim() == 3:
        shared = shared.sum(1, dtype=torch.promote_types(shared.dtype, torch.float32)).to(shared.dtype)
    if shared_gate is not None:
        shared = torch.sigmoid(shared_gate) * shared
    return shared + routed


def add_rms_norm(hidden: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor, eps: float, *,
                 multiply_in_float32: bool = True, delta_weight: torch.Tensor | None = None,
                 delta_eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden, delta [T, H] (delta None: nothing to add). Returns (h, normed) in hidden's dtype; h is
    rounded to that dtype before it is normalised, exactly as `hidden + delta` then `rms_norm`.
    With delta_weight, delta is first normed by its own RMSNorm (delta_weight, delta_eps; rounded as
    `rms_norm` rounds, the same multiply_in_float32): a part's post norm (Gemma's sandwich norms)."""
    if isinstance(delta, tuple):
        delta = moe_sum(*delta)
    if delta_weight is not None and delta is not None:
        delta = rms_norm(delta, delta_weight, eps if delta_eps is None else delta_eps,
                         multiply_in_float32=multiply_in_float32)
    h = hidden if delta is None else hidden + delta
    return h, rms_norm(h, weight, eps, multiply_in_float32=multiply_in_float32)
