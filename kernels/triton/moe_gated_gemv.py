"""The gated MoE at decode sizes: two launches, no sorting (kernels/triton/fused_moe_gated.py chains
an align kernel, the gated up GEMM and the down GEMM; at a handful of tokens the sorted blocks hold one
real row of 16 and the align is a launch of its own).

Each assignment (token, slot) multiplies its token's row by its expert's matrices directly, as
fused_moe's GEMV form does for the ungated experts: `gated_gemv` gives act(x @ gate[e]^T + gate_bias[e],
x @ up[e]^T + up_bias[e]) per assignment, `down_gemv` (h @ down[e]^T + down_bias[e]) * weight. Products
and sums in float32 (the layer is bound by reading the weights); gpt-oss's interleaved gate/up views
are read as their one tensor (gate_up_layout.py). Reference: kernels/reference/moe_gated_experts.py (the unsummed form).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .gate_up_layout import gated_gemv_products, interleaved
from .launch import num_warps

# Up to this many tokens the GEMV form ran until it lost on the H200 (fused_moe_gated.decode_form; the
# bench's "before" path). (BLOCK_N, BLOCK_K, warps) of its launches by which axis of the weight is
# contiguous: fused_moe's GEMV tile where K is (measured on Nemotron-3-Nano's experts), an untuned one
# where N is (gpt-oss's x @ W layout).
GEMV_MAX_TOKENS = 4
TILE_K_CONTIGUOUS = (8, 256, 2)
TILE_N_CONTIGUOUS = (64, 64, 4)


@triton.jit
def gated_act(g, u, alpha, limit, ACT: tl.constexpr, HAS_LIMIT: tl.constexpr):
    """The experts' gated activation in float32 (kernels/reference/moe_gated_experts.gated_activation)."""
    if ACT == 0:  # silu(g) * u
        h = g * tl.sigmoid(g) * u
    else:  # gpt-oss: (clamp(u) + 1) * g * sigmoid(alpha * g), g capped at the limit
        if HAS_LIMIT:
            g = tl.minimum(g, limit)
            u = tl.minimum(tl.maximum(u, -limit), limit)
        h = (u + 1.0) * g * tl.sigmoid(alpha * g)
    return h


@triton.jit
def biased_gated_act(acc_g, acc_u, gb_ptr, ub_ptr, e, cols, col_ok, s_gbe, s_gbn, s_ube, s_ubn, alpha, limit,
                     ACT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_LIMIT: tl.constexpr):
    """The row-block kernels' epilogue (fused_moe_gated, moe_gated_grouped): expert e's gate and up biases
    on [BLOCK_M, BLOCK_N] products, then the gated activation, in float32."""
    if HAS_BIAS:
        acc_g += tl.load(gb_ptr + e * s_gbe + cols * s_gbn, mask=col_ok, other=0.0).to(tl.float32)[None, :]
        acc_u += tl.load(ub_ptr + e * s_ube + cols * s_ubn, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    return gated_act(acc_g, acc_u, alpha, limit, ACT, HAS_LIMIT)


@triton.jit
def _gated_gemv_kernel(x_ptr, g_ptr, u_ptr, gb_ptr, ub_ptr, out_ptr, ids_ptr, N, K, alpha, limit,
                       s_xm, s_xk, s_ge, s_gn, s_gk, s_ue, s_un, s_uk, s_gbe, s_gbn, s_ube, s_ubn, s_om, s_on,
                       TOP_K: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_LIMIT: tl.constexpr,
                       INTERLEAVED: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    a = tl.program_id(0)  # assignment: token * TOP_K + slot
    e = tl.load(ids_ptr + a).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    x_row = x_ptr + (a // TOP_K).to(tl.int64) * s_xm
    acc_g, acc_u = gated_gemv_products(x_row, g_ptr, u_ptr, e, tl.program_id(1), N, K, s_xk, s_ge, s_gn, s_gk, s_ue,
                                       s_un, s_uk, INTERLEAVED, BLOCK_N, BLOCK_K)
    if HAS_BIAS:
        acc_g += tl.load(gb_ptr + e * s_gbe + cols * s_gbn, mask=col_ok, other=0.0).to(tl.float32)
        acc_u += tl.load(ub_ptr + e * s_ube + cols * s_ubn, mask=col_ok, other=0.0).to(tl.float32)
    h = gated_act(acc_g, acc_u, alpha, limit, ACT, HAS_LIMIT)
    tl.store(out_ptr + a.to(tl.int64) * s_om + cols * s_on, h.to(out_ptr.dtype.element_ty), mask=col_ok)


@triton.jit
def _down_gemv_kernel(h_ptr, w_ptr, b_ptr, out_ptr, ids_ptr, weights_ptr, N, K, s_hm, s_hk, s_we, s_wn, s_wk,
                      s_be, s_bn, s_om, s_on, HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    a = tl.program_id(0)
    e = tl.load(ids_ptr + a).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    h_row = h_ptr + a.to(tl.int64) * s_hm
    w_base = w_ptr + e * s_we + cols[:, None] * s_wn
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        k_ok = k < K
        hv = tl.load(h_row + k * s_hk, mask=k_ok, other=0.0).to(tl.float32)[None, :]
        wv = tl.load(w_base + k[None, :] * s_wk, mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        acc += tl.sum(wv.to(tl.float32) * hv, axis=1)
    if HAS_BIAS:
        acc += tl.load(b_ptr + e * s_be + cols * s_bn, mask=col_ok, other=0.0).to(tl.float32)
    acc = acc * tl.load(weights_ptr + a).to(tl.float32)
    tl.store(out_ptr + a.to(tl.int64) * s_om + cols * s_on, acc.to(out_ptr.dtype.element_ty), mask=col_ok)


def _tile(w: torch.Tensor) -> tuple[int, int, int]:
    """The tile for a weight [E, N, K] by its contiguous axis."""
    return TILE_N_CONTIGUOUS if abs(w.stride(1)) < abs(w.stride(2)) else TILE_K_CONTIGUOUS


def moe_gated_gemv_unsummed(x, weights, ids, gate, up, down, act_id: int, gate_bias, up_bias, down_bias, alpha,
                            limit) -> torch.Tensor:
    """[T, k, H] as fused_moe_gated.moe_gated_experts_unsummed, in two launches (act_id: its _GATED code)."""
    T, k = ids.shape
    E, N, K = gate.shape
    H = down.shape[1]
    ids = ids.contiguous()
    weights = weights.contiguous()
    h = torch.empty(T * k, N, dtype=x.dtype, device=x.device)
    has_bias = gate_bias is not None and up_bias is not None
    gb, ub = (gate_bias, up_bias) if has_bias else (x, x)  # unread without biases
    block_n, block_k, warps = _tile(gate)
    _gated_gemv_kernel[(T * k, triton.cdiv(N, block_n))](
        x, gate, up, gb, ub, h, ids, N, K, float(alpha), float(limit or 0.0), x.stride(0), x.stride(1),
        *gate.stride(), *up.stride(), gb.stride(0), gb.stride(-1), ub.stride(0), ub.stride(-1), h.stride(0),
        h.stride(1), TOP_K=k, ACT=act_id, HAS_BIAS=has_bias, HAS_LIMIT=limit is not None,
        INTERLEAVED=interleaved(gate, up), BLOCK_N=block_n,
        BLOCK_K=block_k, num_warps=num_warps(x.device.type, warps))
    out = torch.empty(T * k, H, dtype=x.dtype, device=x.device)
    db = down_bias if down_bias is not None else x
    block_n, block_k, warps = _tile(down)
    _down_gemv_kernel[(T * k, triton.cdiv(H, block_n))](
        h, down, db, out, ids, weights, H, N, h.stride(0), h.stride(1), *down.stride(), db.stride(0), db.stride(-1),
        out.stride(0), out.stride(1), HAS_BIAS=down_bias is not None, BLOCK_N=block_n, BLOCK_K=block_k,
        num_warps=num_warps(x.device.type, warps))
    return out.view(T, k, H)
