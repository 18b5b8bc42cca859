"""The delta-rule gates in one Triton launch: g = -exp(A_log) * softplus(a + dt_bias) (float32) and
beta = sigmoid(b), for gated DeltaNet (g [T, H]) and KDA (g [T, H, D]). The reference takes 6 to 9
torch kernels (casts, add, softplus, exp, neg, mul, sigmoid) per layer and step.
Same arguments and results as kernels/reference/delta_rule_gates.py."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import next_pow2, num_warps

BLOCK_MAX, WARPS = 1024, 4  # a KDA row (32 heads x 128 channels) is 4 programs


@triton.jit
def _gates_kernel(a_ptr, b_ptr, alog_ptr, bias_ptr, g_ptr, beta_ptr, H, D,
                  s_at, s_ah, s_ad, s_bt, s_bh,
                  BLOCK: tl.constexpr, BLOCK_H: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # over H * D, head-major
    ok = offs < H * D
    h, d = offs // D, offs % D
    x = tl.load(a_ptr + t * s_at + h * s_ah + d * s_ad, mask=ok, other=0.0).to(tl.float32)
    x += tl.load(bias_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    # torch's softplus: x above 20, else log1p(exp(x)); log1p as log(u) * e / (u - 1) keeps its
    # precision where exp(x) is tiny (a slow channel's decay is then still nonzero, as torch's)
    e = tl.exp(x)
    u = 1.0 + e
    lp = tl.where(u == 1.0, e, tl.log(u) * (e / (u - 1.0)))
    sp = tl.where(x > 20.0, x, lp)
    rate = tl.exp(tl.load(alog_ptr + h, mask=ok, other=0.0).to(tl.float32))
    tl.store(g_ptr + t * H * D + offs, -rate * sp, mask=ok)
    if tl.program_id(1) == 0:  # beta: one row of H, in the first program of the row
        hh = tl.arange(0, BLOCK_H)
        okh = hh < H
        y = tl.load(b_ptr + t * s_bt + hh * s_bh, mask=okh, other=0.0).to(tl.float32)
        tl.store(beta_ptr + t * H + hh, (1.0 / (1.0 + tl.exp(-y))).to(beta_ptr.dtype.element_ty), mask=okh)


def delta_rule_gates(a, b, A_log, dt_bias, beta_dtype=None):
    """a [T, H] or [T, H, D], b [T, H], A_log (H elements), dt_bias (H * D elements).
    Returns (g shaped as a, float32; beta [T, H] in beta_dtype, b's dtype when None)."""
    T, H = b.shape
    a3 = a if a.dim() == 3 else a[..., None]
    D = a3.shape[2]
    g = torch.empty(a.shape, dtype=torch.float32, device=a.device)
    beta = torch.empty(T, H, dtype=b.dtype if beta_dtype is None else beta_dtype, device=b.device)
    if T == 0:
        return g, beta
    block = min(next_pow2(H * D, 16), BLOCK_MAX)
    grid = (T, triton.cdiv(H * D, block))
    _gates_kernel[grid](a3, b, A_log.reshape(-1), dt_bias.reshape(-1), g, beta, H, D,
                        *a3.stride(), *b.stride(), BLOCK=block, BLOCK_H=next_pow2(H, 16),
                        num_warps=num_warps(a.device.type, WARPS))
    return g, beta
