"""q/k RMSNorm + rotary embedding + the KV-cache write in one Triton launch per attention layer
(the unfused ops take about 30 kernels a layer on a GPU: two rotaries of a dozen each, two norms, two
cache copies). Reference: kernels/reference/qk_norm_rope_kv_write.py.

One program per (token, head) over the Hq query heads then the Hkv key heads: it loads the head, norms
it (statistics in float32), rotates it (each channel's half-split partner is loaded and normed the same
way), and stores q to the output or k to its cache slot, with that token's v beside it. Rounding
follows the reference's order (the norm's product, cos and sin rounded to the dtype, each rotary
product rounded, then their sum), so bf16 results match it to the ulp.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference.qk_norm_rope_kv_write import qk_norm_rope_kv_write as _reference
from .launch import next_pow2, num_warps


@triton.jit
def _normed(x_ptr, offs, ok, w_ptr, inv, HAS_NORM: tl.constexpr, F32_MUL: tl.constexpr):
    """The head's channels `offs` after the RMSNorm of scale `inv` (as the reference rounds them)."""
    x = tl.load(x_ptr + offs, mask=ok, other=0.0)
    if HAS_NORM:
        n = x.to(tl.float32) * inv
        w = tl.load(w_ptr + offs, mask=ok, other=0.0).to(tl.float32)
        if F32_MUL:
            x = (w * n).to(x.dtype)
        else:
            x = (w * n.to(x.dtype).to(tl.float32)).to(x.dtype)
    return x


@triton.jit
def _reduced(f):
    """f - 2 pi round(f / 2 pi), in two steps (6.28125 holds 8 bits, so its multiples stay exact): the
    angle where a GPU's fast cos/sin are accurate, however far the position is."""
    n = tl.floor(f * 0.15915494309189535 + 0.5)
    return (f - n * 6.28125) - n * 0.0019353071795864769


@triton.jit
def _qk_norm_rope_kv_kernel(q_ptr, k_ptr, v_ptr, pos_ptr, freq_ptr, qw_ptr, kw_ptr, qo_ptr, kc_ptr, vc_ptr, slot_ptr,
                            Hq, D, R, page_size, eps, scaling,
                            s_qt, s_qh, s_qd, s_kt, s_kh, s_kd, s_vt, s_vh, s_vd, s_ot, s_oh,
                            s_kp, s_ko, s_kch, s_vp, s_vo, s_vch,
                            HAS_QN: tl.constexpr, HAS_KN: tl.constexpr, F32_MUL: tl.constexpr,
                            BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    d = tl.arange(0, BLOCK_D)
    ok = d < D
    is_q = h < Hq
    j = tl.where(is_q, h, h - Hq).to(tl.int64)
    if is_q:
        base, stride, w_ptr = q_ptr + t * s_qt + j * s_qh, s_qd, qw_ptr
    else:
        base, stride, w_ptr = k_ptr + t * s_kt + j * s_kh, s_kd, kw_ptr
    x = tl.load(base + d * stride, mask=ok, other=0.0)
    xf = x.to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / D + eps)
    half = R // 2
    rot = d < R
    partner = tl.where(d < half, d + half, d - half)
    partner = tl.where(rot, partner, d)
    if is_q:
        y = _normed(base, d * stride, ok, w_ptr, inv, HAS_QN, F32_MUL)
        yp = _normed(base, partner * stride, ok, w_ptr, inv, HAS_QN, F32_MUL)
    else:
        y = _normed(base, d * stride, ok, w_ptr, inv, HAS_KN, F32_MUL)
        yp = _normed(base, partner * stride, ok, w_ptr, inv, HAS_KN, F32_MUL)
    dt = x.dtype
    pos = tl.load(pos_ptr + t).to(tl.float32)
    f = pos * tl.load(freq_ptr + tl.where(d < half, d, d - half), mask=rot, other=0.0).to(tl.float32)
    f = _reduced(f)
    cos = (tl.cos(f) * scaling).to(dt).to(tl.float32)
    sin = (tl.sin(f) * scaling).to(dt).to(tl.float32)
    signed = tl.where(d < half, -yp.to(tl.float32), yp.to(tl.float32))
    a = (y.to(tl.float32) * cos).to(dt).to(tl.float32)
    b = (signed * sin).to(dt).to(tl.float32)
    out = tl.where(rot, (a + b).to(dt), y)
    if is_q:
        tl.store(qo_ptr + t * s_ot + j * s_oh + d, out, mask=ok)
    else:
        slot = tl.load(slot_ptr + t).to(tl.int64)
        page, off = slot // page_size, slot % page_size
        tl.store(kc_ptr + page * s_kp + off * s_ko + j * s_kch + d, out.to(kc_ptr.dtype.element_ty), mask=ok)
        v = tl.load(v_ptr + t * s_vt + j * s_vh + d * s_vd, mask=ok, other=0.0)
        tl.store(vc_ptr + page * s_vp + off * s_vo + j * s_vch + d, v.to(vc_ptr.dtype.element_ty), mask=ok)


def qk_norm_rope_kv_write(q, k, v, positions, inv_freq, k_cache, v_cache, slot_mapping, scaling=1.0, q_norm=None,
                          k_norm=None, eps=1e-6, multiply_in_float32=False, rotary_dim=None):
    """Same arguments and result as kernels.reference.qk_norm_rope_kv_write."""
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    R = D if rotary_dim is None else int(rotary_dim)
    if (T == 0 or R % 2 or R > D or k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1
            or inv_freq.numel() != R // 2):
        return _reference(q, k, v, positions, inv_freq, k_cache, v_cache, slot_mapping, scaling, q_norm, k_norm, eps,
                          multiply_in_float32, rotary_dim)
    out = torch.empty(T, Hq, D, dtype=q.dtype, device=q.device)
    qw = q_norm if q_norm is not None else q
    kw = k_norm if k_norm is not None else k
    _qk_norm_rope_kv_kernel[(T, Hq + Hkv)](
        q, k, v, positions, inv_freq, qw, kw, out, k_cache, v_cache, slot_mapping,
        Hq, D, R, k_cache.shape[1], float(eps), float(scaling),
        *q.stride(), *k.stride(), *v.stride(), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), v_cache.stride(0), v_cache.stride(1),
        v_cache.stride(2),
        HAS_QN=q_norm is not None, HAS_KN=k_norm is not None, F32_MUL=bool(multiply_in_float32),
        BLOCK_D=next_pow2(D), num_warps=num_warps(q.device.type, 1 if D <= 128 else 2))
    return out
