"""Gated, group-wise RMSNorm as Mamba2 (and NemotronH) apply it to the SSM output."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def gated_rms_norm(
    x: torch.Tensor,
    gate: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    group_size: int,
    *,
    norm_before_gate: bool = False,
) -> torch.Tensor:
    """RMSNorm over groups of `group_size` channels, gated by silu(gate).

    norm_before_gate=False (NemotronH, Mamba2's default in its fused kernel): y = norm(x * silu(z)) * w.
    norm_before_gate=True: y = norm(x) * w * silu(z).
    """
    dtype = x.dtype
    xf = x.float()
    g = F.silu(gate.float())
    if not norm_before_gate:
        xf = xf * g
    *lead, width = xf.shape
    if width % group_size:
        raise ValueError(f"gated_rms_norm: width {width} is not a multiple of group size {group_size}")
    grouped = xf.view(*lead, width // group_size, group_size)
    grouped = F.rms_norm(grouped, (group_size,), None, eps)  # x * rsqrt(mean(x^2) + eps), in one op
    out = grouped.view(*lead, width)
    if norm_before_gate:
        return (weight * out.to(dtype)) * g.to(dtype)
    return weight * out.to(dtype)
