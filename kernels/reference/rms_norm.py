"""RMSNorm: x / sqrt(mean(x^2) + eps) * weight, statistics in float32."""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, *, multiply_in_float32: bool = False) -> torch.Tensor:
    """Normalise over the last dimension.

    Llama-style models cast the normalised value back to the input dtype before the weight multiply;
    NemotronH multiplies in float32 and casts the product (`multiply_in_float32=True`). The two agree
    in float32 and differ by rounding in bfloat16, so each model picks the one it was trained with.
    """
    dtype = x.dtype
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if multiply_in_float32:
        return (weight.float() * normed).to(dtype)
    return weight * normed.to(dtype)
