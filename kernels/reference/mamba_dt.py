"""Mamba2's time step: dt = clamp(softplus(dt_raw + dt_bias), *dt_limit), in float32."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def mamba_dt(
    dt: torch.Tensor,
    dt_bias: torch.Tensor | None,
    dt_softplus: bool = True,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
) -> torch.Tensor:
    dt = dt.float()
    if dt_bias is not None:
        dt = dt + dt_bias.float()
    if dt_softplus:
        dt = F.softplus(dt)
    lo, hi = dt_limit
    if lo > 0.0 or hi != float("inf"):
        dt = dt.clamp(min=lo, max=hi)
    return dt
