"""The gated MoE at decode sizes, expert by expert: two launches, no sort, each touched expert's weights
read once for all the tokens routed to it.

One program per (expert, column block). It finds its expert's assignments itself, scanning the router's
ids on the device (the few hundred of a decode batch: a compare and a cumulative sum), and runs them
BLOCK_M at a time through tensor-core products (rows past the expert's count are masked; an expert no
token chose does nothing). So no align kernel runs before the GEMMs (fused_moe.moe_align: one program,
a launch of its own, serial on the device), unlike the sorted chain (fused_moe_gated.py), and unlike
the GEMV form (moe_gated_gemv.py), no token re-reads an expert another token already read.
- `_grouped_gated_up_kernel`: h[a] = act(x[token(a)] @ gate[e]^T + gate_bias[e], x @ up[e]^T + up_bias[e]);
- `_grouped_down_kernel`: out[a] = (h[a] @ down[e]^T + down_bias[e]) * weights[a].
gpt-oss's interleaved gate/up is read as one tensor (gate_up_layout.py). Reference:
kernels/reference/moe_gated_experts.py (moe_gated_experts_unsummed).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .gate_up_layout import gated_products, interleaved
from .launch import next_pow2, num_warps
from .moe_gated_gemv import biased_gated_act

# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages): BLOCK_M 16, the smallest tensor-core row block, holds the
# few rows an expert gets at decode (gpt-oss at 32 tokens: 4 on average); an expert with more runs a
# second block. Untuned: bench/decode_fusions_gpu.py sweeps TILE_CHOICES on a device, TILE_OVERRIDE
# applies one.
TILE = (16, 64, 128, 4, 3)
TILE_CHOICES = ((16, 32, 128, 2, 4), (16, 64, 128, 4, 3), (16, 128, 64, 4, 3), (32, 64, 128, 4, 3))
TILE_OVERRIDE: dict = {}


@triton.jit
def routed_to(ids_ptr, n, e, N_POW2: tl.constexpr):
    """Expert e's assignments among the n in ids (flat [T * k]): (hit [N_POW2] which, rank [N_POW2] each
    one's place among e's in assignment order, count)."""
    offs = tl.arange(0, N_POW2)
    hit = tl.load(ids_ptr + offs, mask=offs < n, other=-1).to(tl.int32) == e
    rank = tl.cumsum(hit.to(tl.int32), axis=0) - 1
    return hit, rank, tl.sum(hit.to(tl.int32), axis=0)


@triton.jit
def rows_of(hit, rank, count, m0, N_POW2: tl.constexpr, BLOCK_M: tl.constexpr):
    """The assignments of ranks m0 ... m0 + BLOCK_M - 1 (a [BLOCK_M] int32) and which rows are real."""
    r = m0 + tl.arange(0, BLOCK_M)
    offs = tl.arange(0, N_POW2)
    picked = hit[None, :] & (rank[None, :] == r[:, None])
    return tl.sum(tl.where(picked, offs[None, :], 0), axis=1), r < count


@triton.jit
def gated_up_rows(x_ptr, g_ptr, u_ptr, gb_ptr, ub_ptr, out_ptr, a, valid, e, pid_n, N, K, rows_per_token, alpha,
                  limit, s_xm, s_xk, s_ge, s_gn, s_gk, s_ue, s_un, s_uk, s_gbe, s_gbn, s_ube, s_ubn, s_om, s_on,
                  ACT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_LIMIT: tl.constexpr, INTERLEAVED: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """h[a] = act(x[a // rows_per_token] @ gate[e]^T + gate_bias[e], ... up ...) for the rows a ([BLOCK_M],
    `valid` the real ones) and columns pid_n * BLOCK_N...: the expert-by-expert and split forms' up step."""
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    x_rows = x_ptr + (a // rows_per_token).to(tl.int64)[:, None] * s_xm
    acc_g, acc_u = gated_products(x_rows, valid, g_ptr, u_ptr, e, pid_n, N, K, s_xk, s_ge, s_gn, s_gk, s_ue,
                                  s_un, s_uk, INTERLEAVED, BLOCK_M, BLOCK_N, BLOCK_K)
    h = biased_gated_act(acc_g, acc_u, gb_ptr, ub_ptr, e, cols, col_ok, s_gbe, s_gbn, s_ube, s_ubn,
                         alpha, limit, ACT, HAS_BIAS, HAS_LIMIT)
    dest = out_ptr + a.to(tl.int64)[:, None] * s_om + cols[None, :] * s_on
    tl.store(dest, h.to(out_ptr.dtype.element_ty), mask=valid[:, None] & col_ok[None, :])


@triton.jit(do_not_specialize=["n"])
def _grouped_gated_up_kernel(x_ptr, g_ptr, u_ptr, gb_ptr, ub_ptr, out_ptr, ids_ptr, n, N, K, rows_per_token,
                             alpha, limit, s_xm, s_xk, s_ge, s_gn, s_gk, s_ue, s_un, s_uk, s_gbe, s_gbn, s_ube,
                             s_ubn, s_om, s_on, ACT: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_LIMIT: tl.constexpr,
                             INTERLEAVED: tl.constexpr, N_POW2: tl.constexpr, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    e, pid_n = tl.program_id(0), tl.program_id(1)
    hit, rank, count = routed_to(ids_ptr, n, e, N_POW2)
    for m0 in range(0, count, BLOCK_M):
        a, valid = rows_of(hit, rank, count, m0, N_POW2, BLOCK_M)
        gated_up_rows(x_ptr, g_ptr, u_ptr, gb_ptr, ub_ptr, out_ptr, a, valid, e.to(tl.int64), pid_n, N, K,
                      rows_per_token, alpha, limit, s_xm, s_xk, s_ge, s_gn, s_gk, s_ue, s_un, s_uk, s_gbe, s_gbn,
                      s_ube, s_ubn, s_om, s_on, ACT, HAS_BIAS, HAS_LIMIT, INTERLEAVED, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit(do_not_specialize=["n"])
def _grouped_down_kernel(h_ptr, w_ptr, b_ptr, out_ptr, ids_ptr, weights_ptr, n, N, K, s_hm, s_hk, s_we, s_wn, s_wk,
                         s_be, s_bn, s_om, s_on, HAS_BIAS: tl.constexpr, N_POW2: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    e, pid_n = tl.program_id(0), tl.program_id(1)
    hit, rank, count = routed_to(ids_ptr, n, e, N_POW2)
    e64 = e.to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    w_cols = w_ptr + e64 * s_we + cols[None, :] * s_wn
    ks = tl.arange(0, BLOCK_K)
    for m0 in range(0, count, BLOCK_M):
        a, valid = rows_of(hit, rank, count, m0, N_POW2, BLOCK_M)
        h_rows = h_ptr + a.to(tl.int64)[:, None] * s_hm
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k = k0 + ks
            k_ok = k < K
            ht = tl.load(h_rows + k[None, :] * s_hk, mask=valid[:, None] & k_ok[None, :], other=0.0)
            acc = tl.dot(ht, tl.load(w_cols + k[:, None] * s_wk, mask=k_ok[:, None] & col_ok[None, :], other=0.0),
                         acc)
        if HAS_BIAS:
            acc += tl.load(b_ptr + e64 * s_be + cols * s_bn, mask=col_ok, other=0.0).to(tl.float32)[None, :]
        acc = acc * tl.load(weights_ptr + a, mask=valid, other=0.0).to(tl.float32)[:, None]
        dest = out_ptr + a.to(tl.int64)[:, None] * s_om + cols[None, :] * s_on
        tl.store(dest, acc.to(out_ptr.dtype.element_ty), mask=valid[:, None] & col_ok[None, :])


def moe_gated_grouped_unsummed(x, weights, ids, gate, up, down, act_id: int, gate_bias, up_bias, down_bias, alpha,
                               limit) -> torch.Tensor:
    """[T, k, H] as fused_moe_gated.moe_gated_experts_unsummed, in two launches (act_id: its _GATED code)."""
    T, k = ids.shape
    E, N, K = gate.shape
    H = down.shape[1]
    n = T * k
    flat = ids.reshape(-1).contiguous()
    wts = weights.reshape(-1).contiguous()
    block_m, block_n, block_k, warps, stages = TILE_OVERRIDE.get("all", TILE)
    n_pow2 = next_pow2(n, 16)
    h = torch.empty(n, N, dtype=x.dtype, device=x.device)
    has_bias = gate_bias is not None or up_bias is not None
    gb = gate_bias if gate_bias is not None else torch.zeros(E, N, dtype=x.dtype, device=x.device) if has_bias else x
    ub = up_bias if up_bias is not None else torch.zeros(E, N, dtype=x.dtype, device=x.device) if has_bias else x
    _grouped_gated_up_kernel[(E, triton.cdiv(N, block_n))](
        x, gate, up, gb, ub, h, flat, n, N, K, k, float(alpha), float(limit or 0.0), x.stride(0), x.stride(1),
        *gate.stride(), *up.stride(), gb.stride(0), gb.stride(-1), ub.stride(0), ub.stride(-1), h.stride(0),
        h.stride(1), ACT=act_id, HAS_BIAS=has_bias, HAS_LIMIT=limit is not None, INTERLEAVED=interleaved(gate, up),
        N_POW2=n_pow2, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        num_warps=num_warps(x.device.type, warps), num_stages=stages)
    out = torch.empty(n, H, dtype=x.dtype, device=x.device)
    db = down_bias if down_bias is not None else x
    _grouped_down_kernel[(E, triton.cdiv(H, block_n))](
        h, down, db, out, flat, wts, n, H, N, h.stride(0), h.stride(1), *down.stride(), db.stride(0), db.stride(-1),
        out.stride(0), out.stride(1), HAS_BIAS=down_bias is not None, N_POW2=n_pow2, BLOCK_M=block_m,
        BLOCK_N=block_n, BLOCK_K=block_k, num_warps=num_warps(x.device.type, warps), num_stages=stages)
    return out.view(T, k, H)
