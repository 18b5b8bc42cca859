"""Whether a gated MoE's gate and up weights are the two halves of one interleaved tensor.

gpt-oss stores gate_up [E, H, 2I] (x @ W layout) with gate in the even columns and up in the odd ones,
and passes the views gate_up[..., ::2].transpose(1, 2) and gate_up[..., 1::2].transpose(1, 2) ([E, I, H],
column stride 2). Read through those views, each weight element is its own 2-byte load (nothing is
contiguous: compiled for sm_90 the gated up GEMM issued 136 ld.global.b16 per iteration and no cp.async,
where the down GEMM's contiguous tile streams through cp.async). Read as the one tensor, the 2I columns
are contiguous: the kernels load [K, 2 * BLOCK_N] tiles and split gate from up in registers.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# bench/decode_fusions_gpu.py sets this False to time the strided read it replaced, in the same run.
READ_AS_ONE = True


def interleaved(gate: torch.Tensor, up: torch.Tensor) -> bool:
    """True when up is gate shifted by one element with the same shape and strides, the output axis
    (dim 1) of stride 2: then gate's pointer with a column stride of 1 walks gate, up, gate, up..."""
    return (READ_AS_ONE and gate.dim() == 3 and gate.shape == up.shape and gate.stride() == up.stride()
            and gate.stride(1) == 2 and gate.dtype == up.dtype and gate.device == up.device
            and up.data_ptr() == gate.data_ptr() + gate.element_size())


@triton.jit
def gated_products(x_rows, valid, g_ptr, u_ptr, e, pid_n, N, K, s_xk, s_ge, s_gn, s_gk, s_ue, s_un, s_uk,
                   INTERLEAVED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """x_rows [BLOCK_M, 1] row pointers (`valid` [BLOCK_M] the real ones) times expert e's gate and up for output
    columns pid_n * BLOCK_N...: (x @ gate^T, x @ up^T), each [BLOCK_M, BLOCK_N] float32, on tensor cores."""
    ks = tl.arange(0, BLOCK_K)
    if INTERLEAVED:  # one contiguous [K, 2 * BLOCK_N] tile per step, gate and up split at the end
        cols2 = pid_n * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)
        w_cols = g_ptr + e * s_ge + cols2[None, :]
        ok2 = cols2 < 2 * N
        acc = tl.zeros([BLOCK_M, 2 * BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k = k0 + ks
            k_ok = k < K
            xt = tl.load(x_rows + k[None, :] * s_xk, mask=valid[:, None] & k_ok[None, :], other=0.0)
            acc = tl.dot(xt, tl.load(w_cols + k[:, None] * s_gk, mask=k_ok[:, None] & ok2[None, :], other=0.0), acc)
        acc_g, acc_u = tl.split(tl.reshape(acc, [BLOCK_M, BLOCK_N, 2]))
    else:
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < N
        g_cols = g_ptr + e * s_ge + cols[None, :] * s_gn
        u_cols = u_ptr + e * s_ue + cols[None, :] * s_un
        acc_g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k = k0 + ks
            k_ok = k < K
            w_ok = k_ok[:, None] & col_ok[None, :]
            xt = tl.load(x_rows + k[None, :] * s_xk, mask=valid[:, None] & k_ok[None, :], other=0.0)
            acc_g = tl.dot(xt, tl.load(g_cols + k[:, None] * s_gk, mask=w_ok, other=0.0), acc_g)
            acc_u = tl.dot(xt, tl.load(u_cols + k[:, None] * s_uk, mask=w_ok, other=0.0), acc_u)
    return acc_g, acc_u


@triton.jit
def gated_gemv_products(x_row, g_ptr, u_ptr, e, pid_n, N, K, s_xk, s_ge, s_gn, s_gk, s_ue, s_un, s_uk,
                        INTERLEAVED: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """One row times expert e's gate and up for columns pid_n * BLOCK_N...: ([BLOCK_N], [BLOCK_N]) float32,
    multiplied and summed in float32 (no tensor cores: bound by reading the weights)."""
    ks = tl.arange(0, BLOCK_K)
    if INTERLEAVED:  # [BLOCK_K, 2 * BLOCK_N] tiles, contiguous along the columns
        cols2 = pid_n * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)
        w_base = g_ptr + e * s_ge + cols2[None, :]
        ok2 = cols2 < 2 * N
        acc = tl.zeros([2 * BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k = k0 + ks
            k_ok = k < K
            xv = tl.load(x_row + k * s_xk, mask=k_ok, other=0.0).to(tl.float32)[:, None]
            wv = tl.load(w_base + k[:, None] * s_gk, mask=k_ok[:, None] & ok2[None, :], other=0.0)
            acc += tl.sum(wv.to(tl.float32) * xv, axis=0)
        acc_g, acc_u = tl.split(tl.reshape(acc, [BLOCK_N, 2]))
    else:
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < N
        g_base = g_ptr + e * s_ge + cols[:, None] * s_gn
        u_base = u_ptr + e * s_ue + cols[:, None] * s_un
        acc_g = tl.zeros([BLOCK_N], dtype=tl.float32)
        acc_u = tl.zeros([BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k = k0 + ks
            k_ok = k < K
            ok = col_ok[:, None] & k_ok[None, :]
            xv = tl.load(x_row + k * s_xk, mask=k_ok, other=0.0).to(tl.float32)[None, :]
            acc_g += tl.sum(tl.load(g_base + k[None, :] * s_gk, mask=ok, other=0.0).to(tl.float32) * xv, axis=1)
            acc_u += tl.sum(tl.load(u_base + k[None, :] * s_uk, mask=ok, other=0.0).to(tl.float32) * xv, axis=1)
    return acc_g, acc_u
