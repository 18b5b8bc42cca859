"""Block-scaled fp8_e4m3 linear layers in Triton: W8A16, the weights dequantised in registers.

Reference: kernels/reference/fp8_linear.py. The weight [N, K] stays fp8 in memory (one byte a
weight: batch-1 decode reads half the bytes of bf16); each tile is loaded as fp8, widened in
registers, and its block's scale is applied to the partial product of that K block (one scale per
column of the tile and K block), so no dequantised copy is ever written. Activations stay in the
model dtype, so this runs on any device Triton serves (XPU included), FP8 matrix units or not.

Two forms by rows: `_gemv_kernel` (decode, a few rows: multiply and sum in float32 on the vector
units, the layer bound by reading the weights) and `_gemm_kernel` (prefill: tl.dot on tiles of
16+ rows, the fp8 tile widened to the activation dtype first).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import compute_units, num_warps

GEMV_MAX_ROWS = 4
# (BLOCK_N, BLOCK_K, warps, stages) of the GEMV: 64 x 128 fp8 bytes a tile, pipelined.
GEMV_TILE = (64, 128, 4, 4)
# Programs per compute unit the GEMV aims for; below that, K is split (the slices summed in the launch).
GEMV_PROGRAMS_PER_UNIT = 4


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, s_ptr, b_ptr, out_ptr, part_ptr, count_ptr, N, K, K_SPLIT, s_xm, s_wn, s_sn, s_sk,
                 s_om, BN: tl.constexpr, BK: tl.constexpr, HAS_BIAS: tl.constexpr, SPLIT: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One row, BLOCK_N columns, one K_SPLIT-long slice of K (split-K when N alone gives too few programs).
    # The partial products stay a 2-D float32 tile, each element scaled by its block's scale, and are
    # reduced across K once after the loop: no cross-lane reduction per iteration, so the loop is only
    # loads and FMAs and the compiler can keep several fp8 tiles in flight.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    split = tl.program_id(2)
    col_ok = cols < N
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    w_rows = w_ptr + cols[:, None].to(tl.int64) * s_wn
    s_rows = s_ptr + (cols // BN) * s_sn
    k_lo = split * K_SPLIT
    k_hi = tl.minimum(k_lo + K_SPLIT, K)
    for dk in range(0, K_SPLIT, BLOCK_K):
        k0 = k_lo + dk
        k = k0 + ks
        k_ok = k < k_hi
        xv = tl.load(x_ptr + row * s_xm + k, mask=k_ok, other=0.0).to(tl.float32)
        wv = tl.load(w_rows + k[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        sv = tl.load(s_rows + (k0 // BK) * s_sk, mask=col_ok, other=0.0)  # a K tile lies inside one scale block
        acc += wv.to(tl.float32) * (xv[None, :] * sv[:, None])
    total = tl.sum(acc, axis=1)
    if SPLIT:
        # Split K reduced in the same launch: each slice leaves its float32 partial, and the slice that
        # arrives last at the tile's counter (acquire-release, so the others' partials are visible)
        # sums them in slice order, writes the output and sets the counter back to 0 for the next call.
        splits = tl.num_programs(2)
        tl.store(part_ptr + (split.to(tl.int64) * tl.num_programs(0) + row) * N + cols, total, mask=col_ok)
        tile = row * tl.num_programs(1) + tl.program_id(1)
        tl.debug_barrier()  # every thread's partial stored before the (cumulative) release of the count
        arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel")
        if arrived == splits - 1:
            total = tl.zeros([BLOCK_N], dtype=tl.float32)
            for s in range(0, splits):
                total += tl.load(part_ptr + (s * tl.num_programs(0) + row) * N + cols, mask=col_ok, other=0.0)
            if HAS_BIAS:
                total += tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
            tl.store(out_ptr + row * s_om + cols, total.to(out_ptr.dtype.element_ty), mask=col_ok)
            tl.atomic_xchg(count_ptr + tile, 0)
    else:
        if HAS_BIAS:
            total += tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * s_om + cols, total.to(out_ptr.dtype.element_ty), mask=col_ok)


@triton.jit
def _gemm_kernel(x_ptr, w_ptr, s_ptr, b_ptr, out_ptr, M, N, K, s_xm, s_wn, s_sn, s_sk, s_om,
                 BN: tl.constexpr, BK: tl.constexpr, HAS_BIAS: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    s_cols = s_ptr + (cols // BN) * s_sn
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_ok = k < K
        xt = tl.load(x_ptr + rows[:, None].to(tl.int64) * s_xm + k[None, :], mask=row_ok[:, None] & k_ok[None, :],
                     other=0.0)
        wt = tl.load(w_ptr + cols[None, :].to(tl.int64) * s_wn + k[:, None], mask=k_ok[:, None] & col_ok[None, :],
                     other=0.0)
        part = tl.dot(xt, wt.to(xt.dtype))
        acc += part * tl.load(s_cols + (k0 // BK) * s_sk, mask=col_ok, other=0.0)[None, :]
    if HAS_BIAS:
        acc += tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + rows[:, None].to(tl.int64) * s_om + cols[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=row_ok[:, None] & col_ok[None, :])


def _k_tile(bk: int, K: int, want: int) -> int:
    """A K tile inside one scale block (a power of two dividing bk), at most `want`."""
    tile = want
    while tile > 16 and (bk % tile or tile > max(16, K)):
        tile //= 2
    return tile


def _gemv_splits(programs: int, K: int, block_k: int, device) -> int:
    """K slices (each a whole number of K tiles) so that programs x slices fills the device."""
    want = GEMV_PROGRAMS_PER_UNIT * compute_units(device)
    tiles = triton.cdiv(K, block_k)
    return max(1, min(tiles, want // max(1, programs)))


# Per device, one counter per output tile of a split GEMV (rows x column blocks), all 0 between
# launches (the last slice of each tile resets its own). Made once, outside any graph capture (the
# decode graphs run each step eagerly before capturing it). A launch splits K only when it has fewer
# tiles than GEMV_PROGRAMS_PER_UNIT x compute units, far below this.
TILE_COUNTERS = 1 << 14
_counters: dict[torch.device, torch.Tensor] = {}


def _tile_counters(device: torch.device) -> torch.Tensor:
    if device not in _counters:
        _counters[device] = torch.zeros(TILE_COUNTERS, dtype=torch.int32, device=device)
    return _counters[device]


def _gemv(flat, weight, scale, bias, out, bn, bk):
    M, K = flat.shape
    N = weight.shape[0]
    block_n, want_k, warps, stages = GEMV_TILE
    block_k = _k_tile(bk, K, want_k)
    columns = triton.cdiv(N, block_n)
    splits = _gemv_splits(M * columns, K, block_k, flat.device)
    if M * columns > TILE_COUNTERS:
        splits = 1
    k_split = triton.cdiv(triton.cdiv(K, block_k), splits) * block_k
    splits = triton.cdiv(K, k_split)
    parts = torch.empty(splits, M, N, dtype=torch.float32, device=out.device) if splits > 1 else out
    counters = _tile_counters(flat.device) if splits > 1 else parts
    _gemv_kernel[(M, columns, splits)](
        flat, weight, scale, bias if bias is not None else out, out, parts, counters, N, K, k_split, flat.stride(0),
        weight.stride(0), scale.stride(0), scale.stride(1), out.stride(0), BN=bn, BK=bk, HAS_BIAS=bias is not None,
        SPLIT=splits > 1, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=num_warps(flat.device.type, warps),
        num_stages=stages)


def fp8_linear(x, weight, scale, block, bias=None):
    """Same arguments and result as kernels.reference.fp8_linear."""
    from ..reference.fp8_linear import fp8_linear as reference

    bn, bk = int(block[0]), int(block[1])
    N, K = weight.shape
    flat = x.reshape(-1, K)
    M = flat.shape[0]
    if M == 0 or x.dtype == torch.float32 or bk % 16 or weight.stride(1) != 1:
        return reference(x, weight, scale, block, bias)
    if flat.stride(1) != 1:
        flat = flat.contiguous()
    out = torch.empty(M, N, dtype=x.dtype, device=x.device)
    b = bias if bias is not None else out
    if M <= GEMV_MAX_ROWS:
        _gemv(flat, weight, scale, bias, out, bn, bk)
    else:
        block_m = 16 if M <= 16 else (32 if M <= 64 else 64)
        block_n, block_k = 128, _k_tile(bk, K, 128)
        _gemm_kernel[(triton.cdiv(M, block_m), triton.cdiv(N, block_n))](
            flat, weight, scale, b, out, M, N, K, flat.stride(0), weight.stride(0), scale.stride(0), scale.stride(1),
            out.stride(0), BN=bn, BK=bk, HAS_BIAS=bias is not None, BLOCK_M=block_m, BLOCK_N=block_n,
            BLOCK_K=block_k, num_warps=num_warps(x.device.type, 4), num_stages=3)
    return out.reshape(*x.shape[:-1], N)
