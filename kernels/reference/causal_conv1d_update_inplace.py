"""One causal conv1d decode step on a state pool: each sequence's window is read from and written back to its slot."""

from __future__ import annotations

import torch

from .causal_conv1d_update import causal_conv1d_update


def causal_conv1d_update_inplace(
    x: torch.Tensor,
    conv_states: torch.Tensor,
    slots: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    activation: str | None = "silu",
) -> torch.Tensor:
    """x [B, C], conv_states [num_slots, C, K-1] (updated in place), slots [B] int64 on its device.
    Returns y [B, C]. The same signature as the Triton in-place kernel (see mamba_state_update_inplace)."""
    y, new_state = causal_conv1d_update(x, conv_states[slots], weight, bias, activation)
    conv_states[slots] = new_state.to(conv_states.dtype)
    return y
