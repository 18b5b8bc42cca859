"""One causal conv1d decode step on a state pool: each sequence's window is read from and written back to its slot."""

from __future__ import annotations

import torch

from .causal_conv1d import _activate
from .causal_conv1d_update import window_taps


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

    The arithmetic of `causal_conv1d_update`, with the pool rows gathered and written back by index
    (the CPU engine runs this once per Mamba layer per decode step)."""
    window = torch.cat([conv_states.index_select(0, slots).to(x.dtype), x.unsqueeze(-1)], dim=-1)  # [B, C, K]
    conv_states.index_copy_(0, slots, window[..., 1:].to(conv_states.dtype))
    return _activate(window_taps(window, weight, bias), activation).to(x.dtype)
