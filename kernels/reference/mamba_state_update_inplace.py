"""One Mamba2 decode step on a state pool: each sequence's state is read from and written back to its slot."""

from __future__ import annotations

import torch

from .mamba_dt import mamba_dt


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
    model has one code path; this form gathers and scatters, the Triton one updates where it lies.

    The arithmetic of `mamba_state_update` in the same order, with the heads viewed as [groups,
    heads per group] instead of B and C copied out per head, and the gathered copy updated in place
    (the CPU engine runs this once per Mamba layer per decode step)."""
    n, H, P = x.shape
    G, N = B.shape[1], B.shape[2]
    per_group = H // G
    dt = mamba_dt(dt, dt_bias, dt_softplus, dt_limit)  # [n, H] float32
    state = ssm_states.index_select(0, slots).float()  # a copy (float32 even when the pool is not)
    grouped = state.view(n, G, per_group, P, N)
    grouped.mul_(torch.exp(dt * A.float()).view(n, G, per_group, 1, 1))
    grouped.add_((dt[..., None] * x.float()).view(n, G, per_group, P, 1) * B.float().view(n, G, 1, 1, N))
    ssm_states.index_copy_(0, slots, state.to(ssm_states.dtype))
    y = (grouped * C.float().view(n, G, 1, 1, N)).sum(-1).view(n, H, P)
    if D is not None:
        y = y + D.float()[:, None] * x.float()
    return y.to(x.dtype)
