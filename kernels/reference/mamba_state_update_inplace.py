"""One Mamba2 decode step on a state pool: each sequence's state is read from and written back to its slot."""

from __future__ import annotations

import torch

from .mamba_state_update import mamba_state_update


def mamba_state_update_inplace(
    ssm_states: torch.Tensor,
    slots: torch.Tensor,
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = True,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
) -> torch.Tensor:
    """ssm_states [num_slots, H, P, N] (updated in place), slots [B] int64 on its device, the rest as
    `mamba_state_update`. Returns y [B, H, P]. The same signature as the Triton in-place kernel, so a
    model has one code path; this form gathers and scatters, the Triton one updates where it lies."""
    y, new_state = mamba_state_update(ssm_states[slots], x, dt, A, B, C, D, dt_bias, dt_softplus, dt_limit)
    ssm_states[slots] = new_state
    return y
