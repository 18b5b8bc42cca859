"""Routed experts whose weights are block-scaled fp8 (reference of kernels/triton/fused_moe_fp8.py).

up [E, I, H] and down [E, H, I] in float8_e4m3fn with scale grids [E, I/bn, H/bk] and [E, H/bn, I/bk]
(fp8_linear.py's layout per expert). Each expert that some token chose is dequantised on its own and
runs on its tokens through the plain MoE reference: the result is the dequantised model's.
"""

from __future__ import annotations

import torch

from .fp8_linear import dequantize_fp8_block
from .mlp import mlp


def moe_experts_fp8(x, weights, ids, up, up_scale, down, down_scale, act="relu2", block=(128, 128)):
    """x [T, H]; weights/ids [T, k]. Returns [T, k, H] in x's dtype: each assignment's weighted
    expert output (the sum over k is the caller's, as the fused form leaves it)."""
    T, k = ids.shape
    out = torch.zeros(T * k, down.shape[1], dtype=torch.float32, device=x.device)
    flat = ids.reshape(-1)
    for e in flat.unique().tolist():
        rows = (flat == e).nonzero().reshape(-1)
        u = dequantize_fp8_block(up[e], up_scale[e], block)
        d = dequantize_fp8_block(down[e], down_scale[e], block)
        out[rows] = mlp(x.float()[rows // k], u, d, None, act)
    return (out.view(T, k, -1) * weights[..., None].float()).to(x.dtype)
