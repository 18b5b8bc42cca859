"""One causal conv1d decode step on a state pool: each sequence's window is read from and written back to its slot."""

from __future__ import annotations

import torch

from .causal_conv1d import _activate


def causal_conv1d_update_inplace(
    x: torch.Tensor,
    conv_states: torch.Tensor,
    slots: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    activation: str | None = "silu",
) -> torch.Tensor:
    """x [B, C], conv_states [num_slots, C, K-1] (updated in place), slots [B] int64 on its device.
    Returns y [B, C]. The same signature as the Triton in-place kernel (see mamba_state_update_inplace).

    The arithmetic of `causal_conv1d_update` (taps added in order, then the bias), on [B, C] columns
    rather than [B, C, 1] slices: the CPU engine runs this once per Mamba layer per decode step."""
    window = torch.cat([conv_states.index_select(0, slots).to(x.dtype), x.unsqueeze(-1)], dim=-1)  # [B, C, K]
    conv_states.index_copy_(0, slots, window[..., 1:].to(conv_states.dtype))
    window = window.to(weight.dtype)
    y = weight[:, 0] * window[..., 0]
    for k in range(1, weight.shape[-1]):
        y = y + weight[:, k] * window[..., k]
    if bias is not None:
        y = y + bias
    return _activate(y, activation).to(x.dtype)
