"""W8A8 fp8 linear layers in Triton for prefill: fp8 activations x fp8 weights on FP8 matrix units.

Reference: kernels/reference/fp8_w8a8.py. Two launches. `_quantize_kernel` rounds the activations
to fp8_e4m3 with a float32 scale per token and ACT_GROUP (128) along K. `_gemm_kernel` multiplies
fp8 x fp8 per K tile of 128 (one activation group, inside one weight scale block), so each tile's
partial product comes off the matrix units on its own and is scaled by the token's group scale and
the column's block scale before it joins the float32 accumulator: the block-wise promotion DeepSeek-V3
describes, which also keeps Hopper's reduced-precision fp8 accumulation to 128 products at a time.

Only where it pays and where it can run: `fp8_linear` here takes rows above the GEMV range (decode
stays W8A16, fp8_linear.py: at a few rows the weights' bytes decide, and W8A16 reads the same
bytes) and weights whose K blocks fit 128-groups; registered only on devices with FP8 matrix
units (availability.w8a8_reason), elsewhere fp8_linear.py's W8A16 serves every row count.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from ..reference.fp8_linear import FP8_MAX
from ..reference.fp8_w8a8 import ACT_GROUP, AMAX_FLOOR, w8a8_fits
from .fp8_linear import GEMV_MAX_ROWS
from .fp8_linear import fp8_linear as w8a16_linear
from .launch import interpreted, next_pow2, num_warps
from .tile_picker import TilePicker

QUANT_ROWS = 16  # rows per program of the activation quantiser (one 128-group each)


@triton.jit
def _quantize_kernel(x_ptr, q_ptr, s_ptr, M, K, s_xm, s_qm, s_sm, FP8_MAX: tl.constexpr, AMAX_FLOOR: tl.constexpr,
                     ROUND_IN_F32: tl.constexpr, ROWS: tl.constexpr, GROUP: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    group = tl.program_id(1)
    k = group * GROUP + tl.arange(0, GROUP)
    ok = (rows < M)[:, None] & (k < K)[None, :]
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * s_xm + k[None, :], mask=ok, other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=1), AMAX_FLOOR) / FP8_MAX
    v = tl.math.div_rn(x, scale[:, None])  # (IEEE division, as torch divides: the same fp8 codes)
    v = tl.minimum(tl.maximum(v, -FP8_MAX), FP8_MAX)
    if ROUND_IN_F32:
        # The interpreter's float32 -> fp8 cast drops the carry of a round-up into the exponent
        # (triton 3.6 runtime/interpreter.py _convert_float: 31.4 becomes 16), so there v is rounded
        # to e4m3's grid first and the cast only relabels it: the mantissa to 3 bits, nearest even,
        # as integer bits (the carry moves into the exponent); below e4m3's smallest normal (2^-6)
        # its fixed 2^-9 steps, by adding 1.5 * 2^14, where float32's own step is 2^-9. On the
        # magnitude, the sign bit put back after (so -0.001 becomes -0, as the hardware has it).
        bits = v.to(tl.uint32, bitcast=True)
        mag = bits & 0x7FFFFFFF
        normal = (mag + 0x7FFFF + ((mag >> 20) & 1)) & 0xFFF00000
        a = mag.to(tl.float32, bitcast=True)
        small = ((a + 24576.0) - 24576.0).to(tl.uint32, bitcast=True)
        v = (tl.where(a < 0.015625, small, normal) | (bits & 0x80000000)).to(tl.float32, bitcast=True)
    tl.store(q_ptr + rows[:, None].to(tl.int64) * s_qm + k[None, :], v.to(q_ptr.dtype.element_ty), mask=ok)
    tl.store(s_ptr + rows.to(tl.int64) * s_sm + group, scale, mask=rows < M)


@triton.jit
def _gemm_kernel(xq_ptr, xs_ptr, w_ptr, ws_ptr, b_ptr, out_ptr, M, N, K, s_xm, s_xsm, s_wn, s_wsn, s_wsk, s_om,
                 BN: tl.constexpr, BK: tl.constexpr, HAS_BIAS: tl.constexpr, TILE_SCALE: tl.constexpr,
                 GROUP_M: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Programs in bands of GROUP_M row tiles walking the column tiles together, so a band's weight
    # columns are read from L2 by its row tiles, not from memory once per row tile.
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    band = pid // (GROUP_M * tiles_n)
    first_m = band * GROUP_M
    band_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % (GROUP_M * tiles_n)) % band_rows
    tile_n = (pid % (GROUP_M * tiles_n)) // band_rows
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    ks = tl.arange(0, BLOCK_K)
    x_rows = xq_ptr + rows[:, None].to(tl.int64) * s_xm
    w_cols = w_ptr + cols[None, :].to(tl.int64) * s_wn  # the weight [N, K] read as [K, N], K contiguous
    xs_rows = xs_ptr + rows.to(tl.int64) * s_xsm
    if TILE_SCALE:  # the tile's columns lie in one weight scale block: one scale a K tile
        ws_tile = ws_ptr + (tile_n * BLOCK_N // BN) * s_wsn
    else:
        ws_cols = ws_ptr + (cols // BN) * s_wsn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):  # BLOCK_K is the activation group: one scale each side per tile
        k = k0 + ks
        k_ok = k < K
        xt = tl.load(x_rows + k[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        wt = tl.load(w_cols + k[:, None], mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        x_scale = tl.load(xs_rows + k0 // BLOCK_K, mask=row_ok, other=0.0)
        if TILE_SCALE:  # (one multiply-add an element: the scaling runs beside the matrix units)
            acc += tl.dot(xt, wt) * (x_scale * tl.load(ws_tile + (k0 // BK) * s_wsk))[:, None]
        else:
            w_scale = tl.load(ws_cols + (k0 // BK) * s_wsk, mask=col_ok, other=0.0)
            acc += tl.dot(xt, wt) * x_scale[:, None] * w_scale[None, :]
    if HAS_BIAS:
        acc += tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + rows[:, None].to(tl.int64) * s_om + cols[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=row_ok[:, None] & col_ok[None, :])


class GemmConfig(NamedTuple):
    block_m: int
    block_n: int
    warps: int
    stages: int
    group_m: int


# Candidates TilePicker times per (N, K, rows bucket) on the device (the first: the default where
# nothing is timed). fp8 tiles of 128 along K are 16 KiB per 128 rows or columns a stage; 128 x 256
# tiles ran at half the speed of 128 x 128 on the H200 (bench/fp8_prefill.py) and are left out.
GEMM_CONFIGS = (GemmConfig(128, 128, 8, 4, 8), GemmConfig(64, 128, 4, 4, 8), GemmConfig(64, 128, 8, 3, 8),
                GemmConfig(64, 64, 4, 5, 8))
PICKER = TilePicker("fp8 W8A8 GEMM")


def quantize_activations(flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Same result as kernels.reference.fp8_w8a8.quantize_activations, for x [M, K] with unit K stride."""
    M, K = flat.shape
    groups = triton.cdiv(K, ACT_GROUP)
    q = torch.empty(M, K, dtype=torch.float8_e4m3fn, device=flat.device)
    s = torch.empty(M, groups, dtype=torch.float32, device=flat.device)
    _quantize_kernel[(triton.cdiv(M, QUANT_ROWS), groups)](
        flat, q, s, M, K, flat.stride(0), q.stride(0), s.stride(0), FP8_MAX=FP8_MAX, AMAX_FLOOR=AMAX_FLOOR,
        ROUND_IN_F32=interpreted(), ROWS=QUANT_ROWS, GROUP=ACT_GROUP, num_warps=num_warps(flat.device.type, 4))
    return q, s


def w8a8_gemm(xq, xs, weight, scale, block, bias, out, config: GemmConfig | None = None) -> GemmConfig:
    """out [M, N] = dequant(xq, xs) @ dequant(weight, scale)^T (+ bias). `config`: one of GEMM_CONFIGS,
    else the one PICKER chose for this shape."""
    M, K = xq.shape
    N = weight.shape[0]
    bn, bk = int(block[0]), int(block[1])
    if config is None:
        key = (N, K, min(next_pow2(M), 8192), bn, bk, out.dtype, bias is not None)
        config = PICKER.pick(xq.device, key, GEMM_CONFIGS,
                             lambda c: w8a8_gemm(xq, xs, weight, scale, block, bias, out, c))
    grid = (triton.cdiv(M, config.block_m) * triton.cdiv(N, config.block_n),)
    _gemm_kernel[grid](
        xq, xs, weight, scale, bias if bias is not None else out, out, M, N, K, xq.stride(0), xs.stride(0),
        weight.stride(0), scale.stride(0), scale.stride(1), out.stride(0), BN=bn, BK=bk, HAS_BIAS=bias is not None,
        TILE_SCALE=bn % config.block_n == 0, GROUP_M=config.group_m, BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=ACT_GROUP,
        num_warps=num_warps(xq.device.type, config.warps), num_stages=config.stages)
    return config


def w8a8_linear(x, weight, scale, block, bias=None):
    """Same arguments and result as kernels.reference.fp8_w8a8.fp8_w8a8_linear (any rows)."""
    N, K = weight.shape
    flat = x.reshape(-1, K)
    if flat.stride(1) != 1:
        flat = flat.contiguous()
    xq, xs = quantize_activations(flat)
    out = torch.empty(flat.shape[0], N, dtype=x.dtype, device=x.device)
    w8a8_gemm(xq, xs, weight, scale, block, bias, out)
    return out.reshape(*x.shape[:-1], N)


def uses_w8a8(x, weight, block) -> bool:
    """The form fp8_linear below takes: W8A8 above the GEMV rows, for 16-bit activations and weights
    whose K blocks fit the 128-groups; W8A16 otherwise."""
    rows = x.numel() // max(1, x.shape[-1])
    return (rows > GEMV_MAX_ROWS and x.dtype in (torch.bfloat16, torch.float16) and w8a8_fits(block)
            and weight.stride(1) == 1)


def fp8_linear(x, weight, scale, block, bias=None):
    """The fp8 linear on a device with FP8 matrix units: W8A8 for prefill rows, W8A16 (fp8_linear.py)
    for decode and what W8A8 does not fit. Same arguments as kernels.reference.fp8_linear; the
    prefill result carries the activations' fp8 rounding (kernels/reference/fp8_w8a8.py)."""
    if uses_w8a8(x, weight, block):
        return w8a8_linear(x, weight, scale, block, bias)
    return w8a16_linear(x, weight, scale, block, bias)
