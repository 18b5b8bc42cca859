"""Block-scaled fp8_e4m3 linear layers in Triton: W8A16, the weights dequantised in registers.

Reference: kernels/reference/fp8_linear.py. The weight [N, K] stays fp8 in memory (one byte a
weight: batch-1 decode reads half the bytes of bf16); each tile is loaded as fp8, widened in
registers, and its block's scale is applied to the partial product of that K block (one scale per
column of the tile and K block), so no dequantised copy is ever written. Activations stay in the
model dtype, so this runs on any device Triton serves (XPU included), FP8 matrix units or not.

Two kernels by rows. `_gemv_kernel` (decode, up to GEMV_MAX_ROWS rows): each program takes a
column tile for all the rows, so a weight tile is read once per call however many rows there are
(before, one program per row read the weights once per row: 4 rows took 2.3x one row's time on
the H200); the rows ride on the matrix units (padded to 16, the weight as either operand) or on the
vector units (one row, or up to 8: fp8_gemv_rows.py), the forms the engine runs per row count being
fp8_decode_forms.py's rule; split-K fills the device, the slices reduced in the launch. Its tiles
are picked per shape on the device at warm-up (tile_picker.py). `_gemm_kernel` (prefill): tl.dot on
tiles of rows.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .fp8_decode_forms import FORM_CODE, dense_forms, dense_runs
from .fp8_gemv_rows import rows_partial
from .fp8_widen import widen_fp8
from .launch import compute_units, interpreted, next_pow2, num_warps
from .tile_picker import TilePicker

# The kernels' FORM codes (fp8_decode_forms.FORM_CODE), as constants the jitted code can compare.
DOT = tl.constexpr(FORM_CODE["dot"])
VEC = tl.constexpr(FORM_CODE["vec"])
MMA = tl.constexpr(FORM_CODE["mma"])
ROWS = tl.constexpr(FORM_CODE["rows"])
DOT_TRUNC = tl.constexpr(FORM_CODE["dot_trunc"])

UNSCALED_FORMS = ("dot", "vec")  # the GEMV forms that run a plain 16-bit weight (SCALED=False: dense_gemv.py)
GEMV_MAX_ROWS = 16  # up to here the GEMV (all rows in each program); above, the tiled GEMM


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, s_ptr, b_ptr, out_ptr, part_ptr, count_ptr, M, N, K, K_SPLIT, s_xm, s_wn, s_sn, s_sk,
                 s_om, BN: tl.constexpr, BK: tl.constexpr, HAS_BIAS: tl.constexpr, SPLIT: tl.constexpr,
                 FORM: tl.constexpr, DOT_F32: tl.constexpr, TILE_SCALE: tl.constexpr, EVEN_K: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SCALED: tl.constexpr = True):
    # BLOCK_N columns of every row (all M of them: each weight tile is read once per call, whatever
    # M), over one K_SPLIT-long slice of K (split-K when the columns alone give too few programs).
    # FORM (fp8_decode_forms.py says which the engine runs):
    # - DOT: the fp8 tile widened to x's dtype and multiplied by the rows (padded to BLOCK_M = 16) on
    #   the matrix units, w [BLOCK_N, BLOCK_K] @ x^T [BLOCK_K, BLOCK_M], so the weight is the operand
    #   that is BLOCK_N wide (wgmma) and the pipeliner keeps several fp8 tiles in flight.
    # - DOT_TRUNC: DOT with the tile widened through float32 (fp8_widen.py: a third of the conversion
    #   instructions), so that a device run tells the widening's share from MMA's other changes.
    # - MMA: the same product the other way round, x [BLOCK_M, BLOCK_K] @ w^T (mma.sync): the fp8 tile
    #   then arrives in 16-byte cp.async copies (8-byte ones as DOT's wgmma operand, read back from
    #   shared memory 2 bytes at a time), widened through float32 as DOT_TRUNC's.
    # - VEC (one row, BLOCK_M = 1): a 2-D float32 partial on the vector units, reduced across K once
    #   after the loop.
    # - ROWS (up to 8 rows, BLOCK_M a power of two): fp8_gemv_rows.py, the vector units for every row.
    # TILE_SCALE: the tile's columns lie in one scale block (BN a multiple of BLOCK_N), so each K
    # tile reads one scale; else one per column. Not SCALED: a plain 16-bit weight, no scales read
    # (dense_gemv.py: the same GEMV for bf16 / fp16 linear layers at decode sizes).
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    split = tl.program_id(1)
    col_ok = cols < N
    rows = tl.arange(0, BLOCK_M)
    row_ok = rows < M
    ks = tl.arange(0, BLOCK_K)
    w_rows = w_ptr + cols[:, None].to(tl.int64) * s_wn
    if TILE_SCALE:
        s_tile = s_ptr + (tl.program_id(0) * BLOCK_N // BN) * s_sn
    else:
        s_cols = s_ptr + (cols // BN) * s_sn
    k_lo = split * K_SPLIT
    k_hi = tl.minimum(k_lo + K_SPLIT, K)
    if FORM == ROWS:
        acc = rows_partial(x_ptr, s_xm, rows, M, w_rows, col_ok, s_ptr + (cols // BN) * s_sn, s_sk, k_lo, k_hi, 0,
                           BK, EVEN_K, BLOCK_M, BLOCK_N, BLOCK_K)
    else:
        if FORM == DOT or FORM == DOT_TRUNC:
            acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        elif FORM == MMA:
            acc_t = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        else:
            acc2 = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            k = k0 + ks
            k_ok = k < k_hi
            if FORM == MMA:  # the tile read K-major, [BLOCK_K, BLOCK_N]
                w_at = w_ptr + cols[None, :].to(tl.int64) * s_wn + k[:, None]
                if EVEN_K:  # K and the slices whole K tiles: no K mask, so nothing stops wide loads
                    wt = tl.load(w_at, mask=col_ok[None, :], other=0.0)
                else:
                    wt = tl.load(w_at, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
            elif EVEN_K:
                wt = tl.load(w_rows + k[None, :], mask=col_ok[:, None], other=0.0)
            else:
                wt = tl.load(w_rows + k[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
            if not SCALED:
                sv = 1.0
            elif TILE_SCALE:  # (a K tile lies inside one scale block: BLOCK_K divides BK)
                sv = tl.load(s_tile + (k0 // BK) * s_sk)
            elif FORM == MMA:
                sv = tl.load(s_cols + (k0 // BK) * s_sk, mask=col_ok, other=0.0)[None, :]
            else:
                sv = tl.load(s_cols + (k0 // BK) * s_sk, mask=col_ok, other=0.0)[:, None]
            if FORM == DOT or FORM == DOT_TRUNC:
                x_at = x_ptr + rows[None, :].to(tl.int64) * s_xm + k[:, None]
                if EVEN_K:
                    xt = tl.load(x_at, mask=row_ok[None, :], other=0.0)
                else:
                    xt = tl.load(x_at, mask=k_ok[:, None] & row_ok[None, :], other=0.0)
                if DOT_F32:  # (the interpreter: its tl.dot multiplies bf16's raw bits)
                    acc += tl.dot(wt.to(tl.float32), xt.to(tl.float32)) * sv
                else:
                    acc += tl.dot(widen_fp8(wt, xt.dtype, FORM == DOT_TRUNC), xt) * sv
            elif FORM == MMA:
                x_at = x_ptr + rows[:, None].to(tl.int64) * s_xm + k[None, :]
                if EVEN_K:
                    xt = tl.load(x_at, mask=row_ok[:, None], other=0.0)
                else:
                    xt = tl.load(x_at, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
                if DOT_F32:
                    acc_t += tl.dot(xt.to(tl.float32), wt.to(tl.float32)) * sv
                else:
                    acc_t += tl.dot(xt, widen_fp8(wt, xt.dtype, True)) * sv
            else:
                if EVEN_K:
                    xv = tl.load(x_ptr + k).to(tl.float32)
                else:
                    xv = tl.load(x_ptr + k, mask=k_ok, other=0.0).to(tl.float32)
                if TILE_SCALE:
                    acc2 += wt.to(tl.float32) * (xv * sv)[None, :]
                else:
                    acc2 += wt.to(tl.float32) * (xv[None, :] * sv)
        if FORM == VEC:
            acc = tl.sum(acc2, axis=1)[:, None]  # [BLOCK_N, 1]
        elif FORM == MMA:
            acc = tl.trans(acc_t)  # [BLOCK_N, BLOCK_M], as the other forms leave it
    out_at = out_ptr + rows[None, :].to(tl.int64) * s_om + cols[:, None]
    ok = col_ok[:, None] & row_ok[None, :]
    if SPLIT:
        # Split K reduced in the same launch: each slice leaves its float32 partial, and the slice that
        # arrives last at its column tile's counter (acquire-release, so the others' partials are
        # visible) sums them in slice order, writes the output and sets the counter back to 0 for the
        # next call.
        splits = tl.num_programs(1)
        part_at = part_ptr + rows[None, :].to(tl.int64) * N + cols[:, None]
        tl.store(part_at + split.to(tl.int64) * M * N, acc, mask=ok)
        tile = tl.program_id(0)
        tl.debug_barrier()  # every thread's partial stored before the (cumulative) release of the count
        arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel")
        if arrived == splits - 1:
            total = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
            for s in range(0, splits):
                total += tl.load(part_at + s * M * N, mask=ok, other=0.0)
            if HAS_BIAS:
                total += tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[:, None]
            tl.store(out_at, total.to(out_ptr.dtype.element_ty), mask=ok)
            tl.atomic_xchg(count_ptr + tile, 0)
    else:
        if HAS_BIAS:
            acc += tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[:, None]
        tl.store(out_at, acc.to(out_ptr.dtype.element_ty), mask=ok)


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


class GemvConfig(NamedTuple):
    # fp8_decode_forms.FORMS: "dot", "dot_trunc", "mma" (matrix units, up to 16 rows), "vec" (one row), "rows" (up to 8)
    form: str
    block_n: int
    block_k: int  # at most: a power of two inside one scale block
    warps: int
    stages: int
    programs_per_unit: int  # below this many programs per compute unit, K is split to reach it


# The candidates TilePicker times per shape on the device, by form (fp8_decode_forms.DENSE_FORMS says
# which forms at which rows; the first tile of the first form is the default wherever nothing is
# timed: the interpreter, or a shape first met inside a graph capture). Few, so warm-up stays short.
CONFIGS = {
    "dot": (GemvConfig("dot", 64, 128, 4, 4, 4), GemvConfig("dot", 128, 128, 4, 3, 4),
            GemvConfig("dot", 64, 128, 4, 4, 8), GemvConfig("dot", 64, 64, 4, 6, 8)),
    "vec": (GemvConfig("vec", 64, 128, 4, 4, 4), GemvConfig("vec", 32, 128, 4, 4, 8)),
    "dot_trunc": (GemvConfig("dot_trunc", 64, 128, 4, 4, 4), GemvConfig("dot_trunc", 128, 128, 4, 3, 4),
                  GemvConfig("dot_trunc", 64, 128, 4, 4, 8), GemvConfig("dot_trunc", 64, 64, 4, 6, 8)),
    "mma": (GemvConfig("mma", 64, 128, 4, 4, 4), GemvConfig("mma", 128, 128, 4, 3, 4),
            GemvConfig("mma", 64, 128, 4, 4, 8)),
    # (stages 1: Triton pipelines only tl.dot's operands)
    "rows": (GemvConfig("rows", 64, 128, 4, 1, 4), GemvConfig("rows", 32, 128, 4, 1, 8),
             GemvConfig("rows", 64, 128, 4, 1, 8)),
}
# A wider set for bench/fp8_kernels.py --sweep (too many to time at every engine start): which
# tiles the candidates above should be.
SWEEP_CONFIGS = {
    "dot": tuple(GemvConfig("dot", n, k, 4, st, ppu) for n in (64, 128) for k in (64, 128) for st in (3, 5)
                 for ppu in (4, 8)) + (GemvConfig("dot", 128, 128, 8, 4, 4), GemvConfig("dot", 32, 128, 4, 4, 8)),
    "vec": tuple(GemvConfig("vec", n, 128, 4, 4, ppu) for n in (16, 32, 64) for ppu in (4, 8)),
    "dot_trunc": tuple(GemvConfig("dot_trunc", n, k, 4, st, ppu) for n in (64, 128) for k in (64, 128)
                       for st in (3, 5) for ppu in (4, 8)),
    "mma": tuple(GemvConfig("mma", n, k, 4, st, ppu) for n in (64, 128) for k in (64, 128) for st in (3, 5)
                 for ppu in (4, 8)),
    "rows": tuple(GemvConfig("rows", n, k, w, 1, ppu) for n in (16, 32, 64) for k in (64, 128) for w in (4,)
                  for ppu in (4, 8)) + (GemvConfig("rows", 64, 128, 8, 1, 4),),
}
PICKER = TilePicker("fp8 GEMV")


def gemv_candidates(rows: int, forms: tuple[str, ...] | None = None) -> tuple[GemvConfig, ...]:
    """The tiles the device times for `rows` rows: those of `forms` (default: the engine's rule,
    fp8_decode_forms.dense_forms) that can take that many rows."""
    forms = dense_forms(rows) if forms is None else forms
    return tuple(c for f in forms if dense_runs(f, rows) for c in CONFIGS[f])


def _gemv_splits(programs: int, K: int, block_k: int, device, per_unit: int) -> int:
    """K slices (each a whole number of K tiles) so that programs x slices fills the device."""
    want = per_unit * compute_units(device)
    tiles = triton.cdiv(K, block_k)
    return max(1, min(tiles, want // max(1, programs)))


# Per device, one counter per column tile of a split GEMV, all 0 between launches (the last slice
# of each tile resets its own). Made once, outside any graph capture (the decode graphs run each
# step eagerly before capturing it). A launch splits K only when it has fewer column tiles than
# programs_per_unit x compute units, far below this.
TILE_COUNTERS = 1 << 14
_counters: dict[torch.device, torch.Tensor] = {}


def _tile_counters(device: torch.device) -> torch.Tensor:
    if device not in _counters:
        _counters[device] = torch.zeros(TILE_COUNTERS, dtype=torch.int32, device=device)
    return _counters[device]


def _block_m(form: str, rows: int) -> int:
    """The rows a program holds: 16 for the matrix units, a power of two up to 8 for "rows", 1 for "vec"."""
    return {"vec": 1, "rows": next_pow2(rows)}.get(form, 16)


def _gemv(flat, weight, scale, bias, out, bn, bk, config: GemvConfig | None = None):
    """All M rows (<= GEMV_MAX_ROWS) in each program. `config`: one of gemv_candidates(M), else
    the one PICKER chose for this shape. `scale` None: a plain 16-bit weight (dense_gemv.py; bn and
    bk then any power of two at least K)."""
    M, K = flat.shape
    N = weight.shape[0]
    if config is None:
        forms = dense_forms(M)  # (the row count matters beyond one row only to "rows", which pads to a power of two)
        key = (N, K, next_pow2(M) if "rows" in forms else M == 1, bn, bk, flat.dtype, weight.dtype, forms)
        # a plain weight: the forms that can skip the scales, whatever the fp8 table says
        candidates = gemv_candidates(M, None if scale is not None else UNSCALED_FORMS)
        config = PICKER.pick(flat.device, key, candidates,
                             lambda c: _gemv(flat, weight, scale, bias, out, bn, bk, c))
    if not dense_runs(config.form, M):
        raise ValueError(f"fp8 GEMV: the {config.form} form does not take {M} rows")
    scaled = scale is not None
    if not scaled and config.form not in UNSCALED_FORMS:
        raise ValueError(f"GEMV: the {config.form} form reads scales; a plain weight takes {UNSCALED_FORMS}")
    s_sn, s_sk = (scale.stride(0), scale.stride(1)) if scaled else (0, 0)
    block_k = _k_tile(bk, K, config.block_k)
    columns = triton.cdiv(N, config.block_n)
    splits = _gemv_splits(columns, K, block_k, flat.device, config.programs_per_unit)
    if columns > TILE_COUNTERS:
        splits = 1
    k_split = triton.cdiv(triton.cdiv(K, block_k), splits) * block_k
    splits = triton.cdiv(K, k_split)
    parts = torch.empty(splits, M, N, dtype=torch.float32, device=out.device) if splits > 1 else out
    counters = _tile_counters(flat.device) if splits > 1 else parts
    _gemv_kernel[(columns, splits)](
        flat, weight, scale if scaled else weight, bias if bias is not None else out, out, parts, counters, M, N, K,
        k_split, flat.stride(0), weight.stride(0), s_sn, s_sk, out.stride(0), BN=bn, BK=bk,
        HAS_BIAS=bias is not None, SPLIT=splits > 1, FORM=FORM_CODE[config.form], DOT_F32=interpreted(),
        TILE_SCALE=bn % config.block_n == 0, EVEN_K=K % block_k == 0, BLOCK_M=_block_m(config.form, M),
        BLOCK_N=config.block_n, BLOCK_K=block_k, SCALED=scaled,
        num_warps=num_warps(flat.device.type, config.warps), num_stages=config.stages)
    return config


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
