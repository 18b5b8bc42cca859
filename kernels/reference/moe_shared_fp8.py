"""A MoE layer over block-scaled fp8 weights, its shared expert with it: the reference of
kernels/triton/fused_moe_fp8.py's `moe_experts_shared_fp8_unsummed`.

The fused GPU form runs the shared expert as S extra slots of the routed experts' width beside
each token's k routed ones (as the bf16 form does, kernels/reference/moe_shared.py), so the whole
layer is one up and one down launch. Here: the shared expert as the dequantised MLP, the routed
experts as kernels/reference/moe_experts_fp8.py, both in float32.
"""

from __future__ import annotations

import torch

from .fp8_linear import fp8_linear
from .mlp import activation
from .moe_experts_fp8 import moe_experts_fp8


def moe_experts_shared_fp8_unsummed(x, weights, ids, up, up_scale, down, down_scale, shared_up, shared_up_scale,
                                    shared_down, shared_down_scale, act="relu2", block=(128, 128)):
    """x [T, H]; weights/ids [T, k]; routed up [E, I, H] / down [E, H, I] and the shared expert's up
    [S*I, H] / down [H, S*I], all fp8 with their scale grids in `block`. Returns (shared [T, H],
    routed parts [T, k, H]) in x's dtype: their sum is the layer's output."""
    h = activation(act, fp8_linear(x.float(), shared_up, shared_up_scale, block))
    shared = fp8_linear(h, shared_down, shared_down_scale, block).to(x.dtype)
    return shared, moe_experts_fp8(x, weights, ids, up, up_scale, down, down_scale, act, block)
