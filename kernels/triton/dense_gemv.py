"""Dense (bf16 / fp16) linear layers at decode sizes in one launch: fp8_linear.py's GEMV on a plain
16-bit weight, no scales read (all rows in each program, split-K reduced inside the launch, tiles
picked per shape on the device at warm-up). Why: at one row cuBLAS runs gpt-oss's o_proj (4096 ->
2880 with a bias) as a split-K GEMV and a reduction kernel, two launches a layer (H200 profile of
bench/families.py); this is one. Above GEMV_MAX_ROWS rows, or another dtype or weight layout, torch's
linear (cuBLAS). Reference: kernels/reference/linear.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .fp8_linear import GEMV_MAX_ROWS, _gemv

# The GEMV's scale block (BN, BK) where there is no scale: any power of two at least K keeps every
# K tile whole and reads nothing (fp8_linear._gemv_kernel, SCALED=False).
NO_SCALE_BLOCK = 1 << 30
DTYPES = (torch.bfloat16, torch.float16)


def linear(x, weight, bias=None):
    """Same arguments and result as kernels.reference.linear."""
    N, K = weight.shape
    flat = x.reshape(-1, K)
    M = flat.shape[0]
    if (M == 0 or M > GEMV_MAX_ROWS or x.dtype not in DTYPES or weight.dtype != x.dtype or weight.stride(1) != 1
            or K % 16):
        return F.linear(x, weight, bias)
    if flat.stride(1) != 1:
        flat = flat.contiguous()
    out = torch.empty(M, N, dtype=x.dtype, device=x.device)
    _gemv(flat, weight, None, bias, out, NO_SCALE_BLOCK, NO_SCALE_BLOCK)
    return out.reshape(*x.shape[:-1], N)
