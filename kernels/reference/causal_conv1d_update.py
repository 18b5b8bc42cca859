"""One decode step of the depthwise causal conv1d for a batch of sequences."""

from __future__ import annotations

import torch

from .causal_conv1d import _activate


def causal_conv1d_update(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    activation: str | None = "silu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [B, C] (one new input per sequence), conv_state [B, C, K-1], weight [C, K].

    Returns (y [B, C], new_state [B, C, K-1]); the caller writes new_state back to its slots.
    """
    window = torch.cat([conv_state.to(x.dtype), x.unsqueeze(-1)], dim=-1)  # [B, C, K]
    return _activate(window_taps(window, weight, bias), activation).to(x.dtype), window[:, :, 1:].clone()


def window_taps(window: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """y[b, c] = sum_k weight[c, k] * window[b, c, k] (+ bias[c]): one output per window, in weight's dtype."""
    y = (window.to(weight.dtype) * weight).sum(-1)
    return y if bias is None else y + bias
