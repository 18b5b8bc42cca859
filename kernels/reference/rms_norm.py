"""RMSNorm: x / sqrt(mean(x^2) + eps) * weight, statistics in float32."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, *, multiply_in_float32: bool = False) -> torch.Tensor:
    """Normalise over the last dimension.

    Llama-style models cast the normalised value back to the input dtype before the weight multiply;
    NemotronH multiplies in float32 and casts the product (`multiply_in_float32=True`). The two agree
    in float32 and differ by rounding in bfloat16, so each model picks the one it was trained with.
    """
    dtype = x.dtype
    if dtype == torch.float32 and weight.dtype == torch.float32:
        # The same formula as torch's own op, one call instead of nine (bit for bit equal in float32:
        # tests/kernels/test_kernels_reference.py checks it against F.rms_norm); the CPU engine runs this 50-odd times a step.
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    xf = x.float()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if multiply_in_float32:
        return (weight.float() * normed).to(dtype)
    return weight * normed.to(dtype)
