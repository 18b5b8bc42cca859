"""Fused MoE over block-scaled fp8 experts in Triton (W8A16): only the routed experts are read,
one byte a weight, each tile's scale applied to its K block's partial product in registers.

Reference: kernels/reference/moe_experts_fp8.py. The same two shapes as the bf16 fused MoE
(kernels/triton/fused_moe.py): up to GEMV_MAX_TOKENS tokens one program per (routed assignment,
column block) multiplies its token's row by its expert's fp8 matrix, and one per (shared-expert
slice, column block) takes every token's row, so the shared expert is read once per call (before,
once per token); the tiles of the forms fp8_decode_forms.MOE_FORMS lets run (the matrix units with
the rows padded to 16, the weight as either operand, or the vector units row by row or all rows at
once) are picked per shape on the device at warm-up (tile_picker.py). Above, the assignments are sorted into
per-expert blocks (`moe_align`, shared with the bf16 form) and each block runs tl.dot against its
expert's tiles, widened from fp8 in registers.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .fp8_decode_forms import FORM_CODE, moe_forms
from .fp8_gemv_rows import rows_partial
from .fp8_widen import widen_fp8
from .fused_moe import _ACT, activate, block_m_for, moe_align
from .launch import interpreted, next_pow2, num_warps
from .tile_picker import TilePicker

DOT = tl.constexpr(FORM_CODE["dot"])
MMA = tl.constexpr(FORM_CODE["mma"])
ROWS = tl.constexpr(FORM_CODE["rows"])  # (any other code: the vector form, row by row)
DOT_TRUNC = tl.constexpr(FORM_CODE["dot_trunc"])

GEMV_MAX_TOKENS = 4


class MoeGemvConfig(NamedTuple):
    # fp8_decode_forms.FORMS: "dot", "dot_trunc", "mma" (matrix units, rows padded to 16), "vec" (row by row), "rows"
    form: str
    block_n: int
    block_k: int  # at most: a power of two inside one scale block
    warps: int
    stages: int


# Candidates TilePicker times per shape on the device, by form (fp8_decode_forms.MOE_FORMS says which
# forms run), the first the default where nothing is timed. Narrower than the dense GEMV's: the
# activation after the sum rules out split-K, so the columns alone must fill the device.
CONFIGS = {"dot": (MoeGemvConfig("dot", 64, 128, 4, 4), MoeGemvConfig("dot", 32, 128, 4, 4)),
           "dot_trunc": (MoeGemvConfig("dot_trunc", 64, 128, 4, 4), MoeGemvConfig("dot_trunc", 32, 128, 4, 4)),
           "vec": (MoeGemvConfig("vec", 32, 128, 4, 4), MoeGemvConfig("vec", 64, 128, 4, 4)),
           "mma": (MoeGemvConfig("mma", 64, 128, 4, 4), MoeGemvConfig("mma", 32, 128, 4, 4)),
           "rows": (MoeGemvConfig("rows", 32, 128, 4, 1), MoeGemvConfig("rows", 64, 128, 4, 1))}
# A wider set for bench/fp8_kernels.py --sweep: which tiles the candidates above should be.
SWEEP_CONFIGS = {"dot": tuple(MoeGemvConfig("dot", n, 128, 4, st) for n in (32, 64, 128) for st in (3, 5))
                 + (MoeGemvConfig("dot", 64, 64, 4, 6),),
                 "vec": tuple(MoeGemvConfig("vec", n, 128, 4, 4) for n in (16, 32, 64)),
                 "dot_trunc": tuple(MoeGemvConfig("dot_trunc", n, 128, 4, st) for n in (32, 64, 128) for st in (3, 5)),
                 "mma": tuple(MoeGemvConfig("mma", n, 128, 4, st) for n in (32, 64, 128) for st in (3, 5)),
                 "rows": tuple(MoeGemvConfig("rows", n, k, 4, 1) for n in (16, 32, 64) for k in (64, 128))}
PICKER = TilePicker("fp8 MoE GEMV")


def gemv_candidates(tokens: int, forms: tuple[str, ...] | None = None) -> tuple[MoeGemvConfig, ...]:
    """The tiles the device times at `tokens` tokens: those of `forms` (default: the engine's rule,
    fp8_decode_forms.moe_forms)."""
    return tuple(c for f in (moe_forms(tokens) if forms is None else forms) for c in CONFIGS[f])


@triton.jit
def _store_rows(acc, out_rows, ok, cols, out_ptr, weights_ptr, p, routed, s_om, ACT: tl.constexpr,
                HAS_WEIGHTS: tl.constexpr):
    # acc [BLOCK_N, R] of output rows out_rows [R]: the activation, a routed row's router weight.
    acc = activate(acc, ACT)
    if HAS_WEIGHTS:
        if routed:
            acc = acc * tl.load(weights_ptr + p).to(tl.float32)
    tl.store(out_ptr + out_rows[None, :].to(tl.int64) * s_om + cols[:, None], acc.to(out_ptr.dtype.element_ty),
             mask=ok)


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, s_ptr, sw_ptr, ss_ptr, out_ptr, ids_ptr, weights_ptr, T, N, K,
                 s_xm, s_we, s_wn, s_se, s_sn, s_sk, s_swn, s_ssn, s_ssk, s_om,
                 TOP_K: tl.constexpr, SLOTS: tl.constexpr, X_PER_TOKEN: tl.constexpr, SHARED_ALONG_K: tl.constexpr,
                 ACT: tl.constexpr, HAS_WEIGHTS: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 FORM: tl.constexpr, DOT_F32: tl.constexpr, EVEN_K: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Program p < T * TOP_K: routed assignment p (token p // TOP_K, slot p % TOP_K), one row times
    # its expert. Past those, slice sl of the shared expert for ALL T tokens: its weight tile read
    # once per call, not once per token. Output row of (token, slot): token * SLOTS + slot, slots
    # [0, TOP_K) routed, the rest the shared slices. FORM: as fp8_linear.py's GEMV's forms.
    p = tl.program_id(0)
    routed = p < T * TOP_K
    sl = tl.maximum(p - T * TOP_K, 0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    rows = tl.arange(0, BLOCK_M)
    n_rows = tl.where(routed, 1, T)
    tokens = tl.where(routed, p // TOP_K, rows)  # the token of each row
    out_rows = tokens * SLOTS + tl.where(routed, p % TOP_K, TOP_K + sl)
    if X_PER_TOKEN:
        x_rows = tokens
    else:
        x_rows = out_rows  # the down launch reads the up launch's row of the same (token, slot)
    # A shared slice is rows [sl*N, (sl+1)*N) of the shared up (the up launch) or columns
    # [sl*K, (sl+1)*K) of the shared down (the down launch); its scales are read at those places
    # in the shared expert's own grid, so the slices are views, never copies.
    if SHARED_ALONG_K:
        w_at = cols
        k_off = sl * K
    else:
        w_at = sl * N + cols
        k_off = sl * 0
    # Each column's weight row selected element-wise: chosen in an `if` as one pointer per column and
    # widened to the tile after it, the tiles compiled to byte loads (LDG.E.U8 for sm_90).
    e = tl.load(ids_ptr + tl.minimum(p, T * TOP_K - 1)).to(tl.int64)
    w_col = tl.where(routed, w_ptr + e * s_we + cols.to(tl.int64) * s_wn, sw_ptr + w_at.to(tl.int64) * s_swn + k_off)
    s_base = tl.where(routed, s_ptr + e * s_se + (cols // BN) * s_sn, ss_ptr + (w_at // BN) * s_ssn)
    sk = tl.where(routed, s_sk, s_ssk)
    w_base = w_col[:, None]
    ks = tl.arange(0, BLOCK_K)
    if FORM == ROWS:  # fp8_gemv_rows.py: every row on the vector units, each weight tile loaded once
        acc = rows_partial(x_ptr, s_xm, x_rows, n_rows, w_base, col_ok, s_base, sk, 0, K, k_off, BK, EVEN_K,
                           BLOCK_M, BLOCK_N, BLOCK_K)
        _store_rows(acc, out_rows, col_ok[:, None] & (rows < n_rows)[None, :], cols, out_ptr, weights_ptr, p, routed,
                    s_om, ACT, HAS_WEIGHTS)
    elif FORM == MMA:  # x [rows, K] @ w^T: fp8_linear.py's MMA form (16-byte weight copies, fp8_widen.py)
        ok = (rows < n_rows)[:, None] & col_ok[None, :]
        x_base = x_ptr + x_rows[:, None].to(tl.int64) * s_xm
        acc_t = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k = k0 + ks
            k_ok = k < K
            wt = tl.load(w_col[None, :] + k[:, None], mask=k_ok[:, None] & col_ok[None, :], other=0.0)
            xt = tl.load(x_base + k[None, :], mask=(rows < n_rows)[:, None] & k_ok[None, :], other=0.0)
            sv = tl.load(s_base + ((k_off + k0) // BK) * sk, mask=col_ok, other=0.0)
            if DOT_F32:
                acc_t += tl.dot(xt.to(tl.float32), wt.to(tl.float32)) * sv[None, :]
            else:
                acc_t += tl.dot(xt, widen_fp8(wt, xt.dtype, True)) * sv[None, :]
        _store_rows(tl.trans(acc_t), out_rows, tl.trans(ok), cols, out_ptr, weights_ptr, p, routed, s_om, ACT,
                    HAS_WEIGHTS)
    elif FORM == DOT or FORM == DOT_TRUNC:
        ok = col_ok[:, None] & (rows < n_rows)[None, :]
        x_base = x_ptr + x_rows[None, :].to(tl.int64) * s_xm
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k = k0 + ks
            k_ok = k < K
            wt = tl.load(w_base + k[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
            xt = tl.load(x_base + k[:, None], mask=k_ok[:, None] & (rows < n_rows)[None, :], other=0.0)
            # (a K tile lies inside one scale block: BLOCK_K divides BK, and K too where slices start at sl*K)
            sv = tl.load(s_base + ((k_off + k0) // BK) * sk, mask=col_ok, other=0.0)
            if DOT_F32:  # (the interpreter: its tl.dot multiplies bf16's raw bits)
                acc += tl.dot(wt.to(tl.float32), xt.to(tl.float32)) * sv[:, None]
            else:
                acc += tl.dot(widen_fp8(wt, xt.dtype, FORM == DOT_TRUNC), xt) * sv[:, None]
        _store_rows(acc, out_rows, ok, cols, out_ptr, weights_ptr, p, routed, s_om, ACT, HAS_WEIGHTS)
    else:
        # One row at a time (the shared slices' tokens one after another, the slice's tiles then
        # mostly from L2): a 2-D float32 partial, each element scaled by its block's scale, reduced
        # once after the loop, so the loop is only loads and FMAs.
        one = tl.arange(0, 1)
        for r in range(0, n_rows):
            token = tl.where(routed, p // TOP_K, r)
            out_row = token * SLOTS + tl.where(routed, p % TOP_K, TOP_K + sl)
            if X_PER_TOKEN:
                x_row = x_ptr + token.to(tl.int64) * s_xm
            else:
                x_row = x_ptr + out_row.to(tl.int64) * s_xm
            acc2 = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                k = k0 + ks
                k_ok = k < K
                xv = tl.load(x_row + k, mask=k_ok, other=0.0).to(tl.float32)
                wv = tl.load(w_base + k[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
                sv = tl.load(s_base + ((k_off + k0) // BK) * sk, mask=col_ok, other=0.0)
                acc2 += wv.to(tl.float32) * (xv[None, :] * sv[:, None])
            _store_rows(tl.sum(acc2, axis=1)[:, None], one + out_row, col_ok[:, None], cols, out_ptr, weights_ptr, p,
                        routed, s_om, ACT, HAS_WEIGHTS)


@triton.jit(do_not_specialize=["num_assignments"])
def _grouped_kernel(x_ptr, w_ptr, s_ptr, out_ptr, sorted_ptr, block_expert_ptr, weights_ptr,
                    N, K, num_assignments, rows_per_token, s_xm, s_we, s_wn, s_se, s_sn, s_sk, s_om,
                    ACT: tl.constexpr, HAS_WEIGHTS: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    expert = tl.load(block_expert_ptr + pid_m)
    if expert < 0:
        return
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    a = tl.load(sorted_ptr + rows)
    valid = a < num_assignments
    token = (a // rows_per_token).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    ks = tl.arange(0, BLOCK_K)
    x_rows = x_ptr + token[:, None] * s_xm
    w_cols = w_ptr + expert.to(tl.int64) * s_we + cols[None, :].to(tl.int64) * s_wn
    s_cols = s_ptr + expert.to(tl.int64) * s_se + (cols // BN) * s_sn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_ok = k < K
        xt = tl.load(x_rows + k[None, :], mask=valid[:, None] & k_ok[None, :], other=0.0)
        wt = tl.load(w_cols + k[:, None], mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        part = tl.dot(xt, wt.to(xt.dtype))
        acc += part * tl.load(s_cols + (k0 // BK) * s_sk, mask=col_ok, other=0.0)[None, :]
    acc = activate(acc, ACT)
    if HAS_WEIGHTS:
        acc = acc * tl.load(weights_ptr + a, mask=valid, other=0.0).to(tl.float32)[:, None]
    tl.store(out_ptr + a.to(tl.int64)[:, None] * s_om + cols[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=valid[:, None] & col_ok[None, :])


def _k_tile(bk: int, want: int, K: int | None = None) -> int:
    """A power-of-two K tile, at most `want`, dividing the scale block (and K when shared slices
    start at multiples of K), so that each tile reads one scale per row."""
    tile = want
    while tile > 16 and (bk % tile or (K is not None and K % tile)):
        tile //= 2
    return tile


def _gemv(x, w, s, ids, weights, x_per_token, act, block, shared=None, along_k=False, config=None):
    """One launch over the T x k routed assignments, then the shared expert's slices (`shared` =
    (weight, scale) of the whole shared up or down) when given, each slice for all T tokens.
    Output [T * slots, N], slots the k routed then the shared slices. `config`: one of
    CONFIGS' tiles, else the one PICKER chose for this shape."""
    T, k = ids.shape
    E, N, K = w.shape
    sw, ss = shared if shared is not None else (w, s)
    n_shared = 0 if shared is None else (sw.shape[1] // K if along_k else sw.shape[0] // N)
    slots = k + n_shared
    out = torch.empty(T * slots, N, dtype=x.dtype, device=x.device)
    _launch_gemv(x, w, s, sw, ss, out, ids, weights, x_per_token, act, block, n_shared, along_k, config)
    return out


def _launch_gemv(x, w, s, sw, ss, out, ids, weights, x_per_token, act, block, n_shared, along_k, config):
    T, k = ids.shape
    E, N, K = w.shape
    if config is None:
        key = (N, K, T, k, n_shared, along_k, x_per_token, block, x.dtype, moe_forms(T))
        config = PICKER.pick(x.device, key, gemv_candidates(T), lambda c: _launch_gemv(
            x, w, s, sw, ss, out, ids, weights, x_per_token, act, block, n_shared, along_k, c))
    block_k = _k_tile(block[1], config.block_k, K if n_shared and along_k else None)
    block_m = {"vec": 1, "rows": next_pow2(T)}.get(config.form, 16)
    _gemv_kernel[(T * k + n_shared, triton.cdiv(N, config.block_n))](
        x, w, s, sw, ss, out, ids.reshape(-1), weights.reshape(-1) if weights is not None else x, T, N, K,
        x.stride(0), w.stride(0), w.stride(1), s.stride(0), s.stride(1), s.stride(2),
        sw.stride(-2), ss.stride(-2), ss.stride(-1), out.stride(0),
        TOP_K=k, SLOTS=k + n_shared, X_PER_TOKEN=x_per_token, SHARED_ALONG_K=along_k, ACT=_ACT[act],
        HAS_WEIGHTS=weights is not None, BN=block[0], BK=block[1], FORM=FORM_CODE[config.form],
        DOT_F32=interpreted(), EVEN_K=K % block_k == 0, BLOCK_M=block_m, BLOCK_N=config.block_n, BLOCK_K=block_k,
        num_warps=num_warps(x.device.type, config.warps), num_stages=config.stages)
    return config


def _grouped(x, w, s, sorted_ids, block_expert, block_m, n, rows_per_token, act, weights, block):
    E, N, K = w.shape
    out = torch.empty(n, N, dtype=x.dtype, device=x.device)
    block_n = 64 if n <= 4096 else 128
    _grouped_kernel[(block_expert.numel(), triton.cdiv(N, block_n))](
        x, w, s, out, sorted_ids, block_expert, weights.reshape(-1) if weights is not None else x,
        N, K, n, rows_per_token, x.stride(0), w.stride(0), w.stride(1), s.stride(0), s.stride(1), s.stride(2),
        out.stride(0), ACT=_ACT[act], HAS_WEIGHTS=weights is not None, BN=block[0], BK=block[1],
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=_k_tile(block[1], 128),
        num_warps=num_warps(x.device.type, 4), num_stages=3)
    return out


def moe_experts_fp8(x, weights, ids, up, up_scale, down, down_scale, act="relu2", block=(128, 128)):
    """Same arguments and result as kernels.reference.moe_experts_fp8 ([T, k, H], unsummed)."""
    from ..reference.moe_experts_fp8 import moe_experts_fp8 as reference

    T, k = ids.shape
    if T == 0 or act not in _ACT or x.dtype == torch.float32 or block[1] % 16 or x.stride(1) != 1:
        return reference(x, weights, ids, up, up_scale, down, down_scale, act, block)
    block = (int(block[0]), int(block[1]))
    if T <= GEMV_MAX_TOKENS:
        h = _gemv(x, up, up_scale, ids, None, True, act, block)
        return _gemv(h, down, down_scale, ids, weights, False, None, block).view(T, k, -1)
    n = T * k
    block_m = block_m_for(n, up.shape[0])
    sorted_ids, block_expert, _ = moe_align(ids, up.shape[0], block_m)
    h = _grouped(x, up, up_scale, sorted_ids, block_expert, block_m, n, k, act, None, block)
    y = _grouped(h, down, down_scale, sorted_ids, block_expert, block_m, n, 1, None, weights, block)
    return y.view(T, k, -1)


def moe_experts_shared_fp8_unsummed(x, weights, ids, up, up_scale, down, down_scale, shared_up, shared_up_scale,
                                    shared_down, shared_down_scale, act="relu2", block=(128, 128)):
    """Same arguments as kernels.reference.moe_shared_fp8; returns (shared parts [T, S, H] or the
    shared expert [T, H], routed parts [T, k, H]). Up to GEMV_MAX_TOKENS tokens the shared expert
    rides in the routed GEMVs as S slices of the experts' width: two launches for the layer;
    otherwise (or when its size is not a multiple of the experts') it runs as its own fp8 MLP."""
    from ..reference.mlp import activation
    from .fp8_linear import fp8_linear

    T, k = ids.shape
    E, I, H = up.shape
    S = shared_up.shape[0] // I
    fits = (shared_up.shape == (S * I, H) and shared_down.shape == (H, S * I) and S > 0
            and shared_up.stride(1) == 1 and shared_down.stride(1) == 1)
    if T == 0 or T > GEMV_MAX_TOKENS or not fits or act not in _ACT or x.dtype == torch.float32 \
            or block[1] % 16 or x.stride(1) != 1:
        h = activation(act, fp8_linear(x, shared_up, shared_up_scale, block))
        shared = fp8_linear(h, shared_down, shared_down_scale, block)
        return shared, moe_experts_fp8(x, weights, ids, up, up_scale, down, down_scale, act, block)
    block = (int(block[0]), int(block[1]))
    h = _gemv(x, up, up_scale, ids, None, True, act, block, (shared_up, shared_up_scale), along_k=False)
    y = _gemv(h, down, down_scale, ids, weights, False, None, block, (shared_down, shared_down_scale), along_k=True)
    y = y.view(T, k + S, -1)
    return y[:, k:], y[:, :k]
