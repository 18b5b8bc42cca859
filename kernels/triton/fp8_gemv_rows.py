"""The vector-unit W8A16 GEMV for up to 8 rows: each fp8 weight tile is loaded once, 16 weights to a
thread-load, widened in registers and multiplied by every row.

A helper of the fp8 GEMVs (fp8_linear.py's dense one, fused_moe_fp8.py's experts): it returns the
float32 partial product [BLOCK_N, BLOCK_M] of one K range, which the caller scales nowhere else and
finishes as its other forms do (split-K, activation, store). Why this shape, from the machine code
(core/bench/compiled_loads.py, sm_90): the tile is a [BLOCK_N, BLOCK_K // 16, 16] view of the [BLOCK_N,
BLOCK_K] load, so each thread's 16 weights of one column are summed against a row's 16 activations
inside the thread (FFMA only, no shuffle per tile) into a [BLOCK_N, BLOCK_K // 16] partial per row,
reduced across threads once after the loop. Each row keeps its own partial (a0..a7, the unused ones
compiled away): folded into one 4-D tensor, Triton lays the product out by the activations and moves
the weights through shared memory, with a shuffle reduction every tile. A row's activations are
loaded as [BLOCK_K // 16, 16] (one 2-byte load a thread, then two 16-byte shared-memory reads into
the weights' layout; loaded flat, sixteen 2-byte ones). Triton pipelines through cp.async only the
loads that feed tl.dot; the bytes in flight here come from occupancy: at 1 row, BLOCK_N 64, 60
registers a thread (the one-row "vec" form: 118), so twice the programs fit on an SM. Loading the
next tile by hand before the current one's FMAs kept the fp8 bytes unpacked, a byte a register
across the loop: 110 registers and 91 byte permutes a K step.

Cost per weight: one conversion to f16 pairs (F2FP) and one to f32 (HADD2.F32), then one FFMA per row:
the form suits few rows; at many rows the matrix-unit forms do the multiplies.
"""

from __future__ import annotations

import triton
import triton.language as tl

ROWS_MAX = 8  # accumulators a0..a7 below
VEC = 16  # weights per thread-load: 16 bytes of fp8


@triton.jit
def _row_part(x_row, k, k_hi, n_rows, r: tl.constexpr, wt, G: tl.constexpr, EVEN_K: tl.constexpr):
    # Row r's products with the tile wt [BLOCK_N, G, 16], summed over each thread's 16 weights.
    k2 = tl.reshape(k, [G, 16])
    if EVEN_K:  # (a scalar mask: the activations' loads stay wide)
        xv = tl.load(x_row + k2, mask=r < n_rows, other=0.0)
    else:
        xv = tl.load(x_row + k2, mask=(k2 < k_hi) & (r < n_rows), other=0.0)
    return tl.sum(wt * xv.to(tl.float32)[None, :, :], axis=2)


@triton.jit
def _into(out, rows, r: tl.constexpr, part):
    # part [BLOCK_N, G] of row r -> column r of out [BLOCK_N, BLOCK_M]
    return tl.where(rows[None, :] == r, tl.sum(part, axis=1)[:, None], out)


@triton.jit
def rows_partial(x_ptr, s_xm, x_rows, n_rows, w_rows, col_ok, s_cols, s_sk, k_lo, k_hi, k_scale,
                 BK: tl.constexpr, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    """sum over k in [k_lo, k_hi) of w[col, k] * scale(col, k) * x[row, k] for the first n_rows of
    BLOCK_M (<= 8) rows, as float32 [BLOCK_N, BLOCK_M] (rows past n_rows 0).
    x_rows [BLOCK_M]: each row's index into x (stride s_xm); w_rows [BLOCK_N, 1]: each column's
    weight row; s_cols [BLOCK_N]: each column's scale row, K block b at s_cols + b * s_sk, where
    b = (k_scale + k) // BK (k_scale: where k = 0 lies in the scale grid). EVEN_K: the range is whole
    K tiles (no K mask on the weights)."""
    G: tl.constexpr = BLOCK_K // 16
    ks = tl.arange(0, BLOCK_K)
    rows = tl.arange(0, BLOCK_M)
    zero = tl.zeros([BLOCK_N, G], dtype=tl.float32)
    a0, a1, a2, a3, a4, a5, a6, a7 = zero, zero, zero, zero, zero, zero, zero, zero
    x0 = x_ptr + tl.sum(tl.where(rows == 0, x_rows, 0)).to(tl.int64) * s_xm
    x1 = x_ptr + tl.sum(tl.where(rows == 1, x_rows, 0)).to(tl.int64) * s_xm
    x2 = x_ptr + tl.sum(tl.where(rows == 2, x_rows, 0)).to(tl.int64) * s_xm
    x3 = x_ptr + tl.sum(tl.where(rows == 3, x_rows, 0)).to(tl.int64) * s_xm
    x4 = x_ptr + tl.sum(tl.where(rows == 4, x_rows, 0)).to(tl.int64) * s_xm
    x5 = x_ptr + tl.sum(tl.where(rows == 5, x_rows, 0)).to(tl.int64) * s_xm
    x6 = x_ptr + tl.sum(tl.where(rows == 6, x_rows, 0)).to(tl.int64) * s_xm
    x7 = x_ptr + tl.sum(tl.where(rows == 7, x_rows, 0)).to(tl.int64) * s_xm
    for k0 in range(k_lo, k_hi, BLOCK_K):
        k = k0 + ks
        if EVEN_K:
            wt = tl.load(w_rows + k[None, :], mask=col_ok[:, None], other=0.0)
        else:
            wt = tl.load(w_rows + k[None, :], mask=col_ok[:, None] & (k < k_hi)[None, :], other=0.0)
        wt = tl.reshape(wt.to(tl.float32), [BLOCK_N, G, 16])
        # (a K tile lies inside one scale block: BLOCK_K divides BK)
        sv = tl.load(s_cols + ((k_scale + k0) // BK) * s_sk, mask=col_ok, other=0.0)[:, None]
        a0 += _row_part(x0, k, k_hi, n_rows, 0, wt, G, EVEN_K) * sv
        if BLOCK_M > 1:
            a1 += _row_part(x1, k, k_hi, n_rows, 1, wt, G, EVEN_K) * sv
        if BLOCK_M > 2:
            a2 += _row_part(x2, k, k_hi, n_rows, 2, wt, G, EVEN_K) * sv
            a3 += _row_part(x3, k, k_hi, n_rows, 3, wt, G, EVEN_K) * sv
        if BLOCK_M > 4:
            a4 += _row_part(x4, k, k_hi, n_rows, 4, wt, G, EVEN_K) * sv
            a5 += _row_part(x5, k, k_hi, n_rows, 5, wt, G, EVEN_K) * sv
            a6 += _row_part(x6, k, k_hi, n_rows, 6, wt, G, EVEN_K) * sv
            a7 += _row_part(x7, k, k_hi, n_rows, 7, wt, G, EVEN_K) * sv
    out = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
    out = _into(out, rows, 0, a0)
    if BLOCK_M > 1:
        out = _into(out, rows, 1, a1)
    if BLOCK_M > 2:
        out = _into(_into(out, rows, 2, a2), rows, 3, a3)
    if BLOCK_M > 4:
        out = _into(_into(_into(_into(out, rows, 4, a4), rows, 5, a5), rows, 6, a6), rows, 7, a7)
    return out
