"""Fused MoE over block-scaled fp8 experts in Triton (W8A16): only the routed experts are read,
one byte a weight, each tile's scale applied to its K block's partial product in registers.

Reference: kernels/reference/moe_experts_fp8.py. The same two shapes as the bf16 fused MoE
(kernels/triton/fused_moe.py): up to GEMV_MAX_TOKENS tokens one program per (assignment, column
block) multiplies its token's row by its expert's fp8 matrix on the vector units; above, the
assignments are sorted into per-expert blocks (`moe_align`, shared with the bf16 form) and each
block runs tl.dot against its expert's tiles, widened from fp8 in registers.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .fused_moe import _ACT, activate, block_m_for, moe_align
from .launch import num_warps

GEMV_MAX_TOKENS = 4
# (BLOCK_N, BLOCK_K, warps, stages): 32 x 128 fp8 bytes a tile, pipelined; narrower than the dense GEMV's
# because the activation after the sum rules out split-K, so the columns alone must fill the device.
GEMV_TILE = (32, 128, 4, 4)


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, s_ptr, out_ptr, ids_ptr, weights_ptr, N, K,
                 s_xm, s_we, s_wn, s_se, s_sn, s_sk, s_om,
                 TOP_K: tl.constexpr, X_PER_TOKEN: tl.constexpr, ACT: tl.constexpr, HAS_WEIGHTS: tl.constexpr,
                 BN: tl.constexpr, BK: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    a = tl.program_id(0)  # assignment: token * TOP_K + slot
    token = a // TOP_K
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    if X_PER_TOKEN:
        x_row = x_ptr + token.to(tl.int64) * s_xm
    else:
        x_row = x_ptr + a.to(tl.int64) * s_xm
    e = tl.load(ids_ptr + a).to(tl.int64)
    w_base = w_ptr + e * s_we + cols[:, None].to(tl.int64) * s_wn
    s_base = s_ptr + e * s_se + (cols // BN) * s_sn
    ks = tl.arange(0, BLOCK_K)
    # A 2-D float32 partial, each element scaled by its block's scale, reduced once after the loop
    # (as the dense GEMV in fp8_linear.py): the loop is only loads and FMAs.
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_ok = k < K
        xv = tl.load(x_row + k, mask=k_ok, other=0.0).to(tl.float32)
        wv = tl.load(w_base + k[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        sv = tl.load(s_base + (k0 // BK) * s_sk, mask=col_ok, other=0.0)
        acc += wv.to(tl.float32) * (xv[None, :] * sv[:, None])
    acc = activate(tl.sum(acc, axis=1), ACT)
    if HAS_WEIGHTS:
        acc = acc * tl.load(weights_ptr + a).to(tl.float32)
    tl.store(out_ptr + a.to(tl.int64) * s_om + cols, acc.to(out_ptr.dtype.element_ty), mask=col_ok)


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


def _k_tile(bk: int, want: int) -> int:
    tile = want
    while tile > 16 and bk % tile:
        tile //= 2
    return tile


def _gemv(x, w, s, ids, weights, x_per_token, act, block):
    T, k = ids.shape
    E, N, K = w.shape
    out = torch.empty(T * k, N, dtype=x.dtype, device=x.device)
    block_n, want_k, warps, stages = GEMV_TILE
    _gemv_kernel[(T * k, triton.cdiv(N, block_n))](
        x, w, s, out, ids.reshape(-1), weights.reshape(-1) if weights is not None else x, N, K,
        x.stride(0), w.stride(0), w.stride(1), s.stride(0), s.stride(1), s.stride(2), out.stride(0),
        TOP_K=k, X_PER_TOKEN=x_per_token, ACT=_ACT[act], HAS_WEIGHTS=weights is not None, BN=block[0], BK=block[1],
        BLOCK_N=block_n, BLOCK_K=_k_tile(block[1], want_k), num_warps=num_warps(x.device.type, warps),
        num_stages=stages)
    return out


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
