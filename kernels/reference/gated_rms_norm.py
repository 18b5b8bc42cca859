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
    activation: str = "silu",
    multiply_in_float32: bool = False,
) -> torch.Tensor:
    """RMSNorm over groups of `group_size` channels, gated by act(gate), act silu or sigmoid.

    norm_before_gate=False (NemotronH, Mamba2's default in its fused kernel): y = norm(x * act(z)) * w.
    norm_before_gate=True: y = norm(x) * w * act(z).
    The norm is rounded to x's dtype before the weight and the gate multiply it, in that dtype, as
    Mamba2's norm rounds; multiply_in_float32 keeps it all in float32 and rounds y once (KDA's
    o_norm, the checkpoint's FusedRMSNormGated: sigmoid gate, norm before gate).
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"gated_rms_norm: activation {activation!r} is not one of {sorted(ACTIVATIONS)}")
    dtype = x.dtype
    xf = x.float()
    g = ACTIVATIONS[activation](gate.float())
    if not norm_before_gate:
        xf = xf * g
    *lead, width = xf.shape
    if width % group_size:
        raise ValueError(f"gated_rms_norm: width {width} is not a multiple of group size {group_size}")
    grouped = xf.view(*lead, width // group_size, group_size)
    grouped = F.rms_norm(grouped, (group_size,), None, eps)  # x * rsqrt(mean(x^2) + eps), in one op
    out = grouped.view(*lead, width)
    if multiply_in_float32:
        y = out * weight.float()
        return (y * g if norm_before_gate else y).to(dtype)
    if norm_before_gate:
        return (weight * out.to(dtype)) * g.to(dtype)
    return weight * out.to(dtype)


ACTIVATIONS = {"silu": F.silu, "sigmoid": torch.sigmoid}  # the gate's, by name
