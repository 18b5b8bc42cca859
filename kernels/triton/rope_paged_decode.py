"""A decode step's attention in one launch from the q/k/v projection on: the q/k norms, the rotary
embedding, the new k and v into the paged cache and the attention over the context (one more small
launch to merge the context's slices where they are split). Unfused: qk_norm_rope_kv_write's launch
then paged_attention_decode's. Reference: kernels/reference/rope_paged_decode.py.

Each program of paged_attention_decode's grid (request, KV head, slice of the context) norms and
rotates the query heads of its KV head, rounded as qk_norm_rope.py rounds them, and the new k. The
program whose slice holds the new token writes k and v into the cache and takes the new token's score
from its registers; every program reads only the tokens cached before, so no program reads a slot
another one writes in the same launch.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import next_pow2, num_warps
from .paged_attention_decode import (TOKENS_PER_BLOCK, WARPS, _merge_splits_kernel, _num_splits, _tanh,
                                     attend_pages, program_rows, store_out)
from .qk_norm_rope import _reduced


@triton.jit
def _norm_rope_rows(base, s_d, rows_ok, d, D, R, w_ptr, eps, cos, sin, HAS_NORM: tl.constexpr,
                    F32_MUL: tl.constexpr):
    """Rows [M, D] of heads at `base` ([M, 1] pointers) normed and rotated as qk_norm_rope.py does."""
    in_head = d < D
    ok = rows_ok[:, None] & in_head[None, :]
    half = R // 2
    rot = d < R
    partner = tl.where(rot, tl.where(d < half, d + half, d - half), d)
    y = tl.load(base + d[None, :] * s_d, mask=ok, other=0.0)
    yp = tl.load(base + partner[None, :] * s_d, mask=ok, other=0.0)
    dt = y.dtype
    if HAS_NORM:
        inv = 1.0 / tl.sqrt(tl.sum(y.to(tl.float32) * y.to(tl.float32), axis=1) / D + eps)[:, None]
        w = tl.load(w_ptr + d, mask=in_head, other=0.0).to(tl.float32)[None, :]
        wp = tl.load(w_ptr + partner, mask=in_head, other=0.0).to(tl.float32)[None, :]
        if F32_MUL:
            y = (w * (y.to(tl.float32) * inv)).to(dt)
            yp = (wp * (yp.to(tl.float32) * inv)).to(dt)
        else:
            y = (w * (y.to(tl.float32) * inv).to(dt).to(tl.float32)).to(dt)
            yp = (wp * (yp.to(tl.float32) * inv).to(dt).to(tl.float32)).to(dt)
    signed = tl.where((d < half)[None, :], -yp.to(tl.float32), yp.to(tl.float32))
    a = (y.to(tl.float32) * cos.to(dt).to(tl.float32)[None, :]).to(dt).to(tl.float32)
    b = (signed * sin.to(dt).to(tl.float32)[None, :]).to(dt).to(tl.float32)
    return tl.where(rot[None, :], (a + b).to(dt), y)


@triton.jit(do_not_specialize=["tokens_per_split", "num_splits", "s_tb"])
def _rope_paged_decode_kernel(
    q_ptr, k_ptr, v_ptr, pos_ptr, freq_ptr, qw_ptr, kw_ptr, slot_ptr,
    kc_ptr, vc_ptr, table_ptr, ctx_ptr, o_ptr, part_acc_ptr, part_ml_ptr, sinks_ptr,
    scale, softcap, window, eps, scaling, head_dim, R, page_size, rep, tokens_per_split, num_splits,
    s_qb, s_qh, s_qd, s_kb, s_kh, s_kd, s_vb, s_vh, s_vd,
    s_kp, s_ko, s_kch, s_kcd, s_vp, s_vo, s_vch, s_vcd,
    s_tb, s_tp, s_ob, s_oh, s_od,
    HAS_QN: tl.constexpr, HAS_KN: tl.constexpr, F32_MUL: tl.constexpr,
    HAS_WINDOW: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HAS_SINKS: tl.constexpr, SPLIT: tl.constexpr,
    DOT_PRECISION: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    b, kv_head, split, ctx, offs_r, offs_d, mask_r, mask_d, heads = program_rows(ctx_ptr, rep, head_dim, BLOCK_R,
                                                                                 BLOCK_D)

    # the new token's angles, then q (the KV head's query heads) and k normed and rotated
    half = R // 2
    f = tl.load(pos_ptr + b).to(tl.float32) * tl.load(freq_ptr + tl.where(offs_d < half, offs_d, offs_d - half),
                                                      mask=offs_d < R, other=0.0).to(tl.float32)
    f = _reduced(f)
    cos, sin = tl.cos(f) * scaling, tl.sin(f) * scaling
    q = _norm_rope_rows(q_ptr + b.to(tl.int64) * s_qb + heads[:, None] * s_qh, s_qd, mask_r, offs_d, head_dim, R,
                        qw_ptr, eps, cos, sin, HAS_QN, F32_MUL)
    q = q.to(tl.float32).to(kc_ptr.dtype.element_ty)  # (exact; through float32 as a load would give it)
    first = offs_r == 0  # k as the first row of a tile (its other rows masked off)
    k_rows = _norm_rope_rows(k_ptr + b.to(tl.int64) * s_kb + kv_head * s_kh + offs_r[:, None] * 0, s_kd, first,
                             offs_d, head_dim, R, kw_ptr, eps, cos, sin, HAS_KN, F32_MUL)
    k_new = tl.sum(tl.where(first[:, None], k_rows.to(tl.float32), 0.0), axis=0).to(kc_ptr.dtype.element_ty)
    v_new = tl.load(v_ptr + b.to(tl.int64) * s_vb + kv_head * s_vh + offs_d * s_vd, mask=mask_d, other=0.0)
    v_new = v_new.to(vc_ptr.dtype.element_ty)
    owner = split == (ctx - 1) // tokens_per_split  # this slice holds the new token
    if owner:
        slot = tl.load(slot_ptr + b).to(tl.int64)
        page, off = slot // page_size, slot % page_size
        tl.store(kc_ptr + page * s_kp + off * s_ko + kv_head * s_kch + offs_d * s_kcd, k_new, mask=mask_d)
        tl.store(vc_ptr + page * s_vp + off * s_vo + kv_head * s_vch + offs_d * s_vcd, v_new, mask=mask_d)

    lo = split * tokens_per_split  # tokens_per_split is a multiple of BLOCK_T
    hi = tl.minimum(lo + tokens_per_split, ctx - 1)  # the cached tokens; the new one comes from registers
    if HAS_WINDOW:
        lo = tl.maximum(lo, ctx - window)
    m_i, l_i, acc = attend_pages(q, kc_ptr, vc_ptr, table_ptr, b, kv_head, lo, hi, scale, softcap, page_size,
                                 offs_d, mask_d, s_kp, s_ko, s_kch, s_kcd, s_vp, s_vo, s_vch, s_vcd, s_tb, s_tp,
                                 HAS_SOFTCAP, DOT_PRECISION, BLOCK_R, BLOCK_T, BLOCK_D)
    if owner:  # the new token's score and value, as the loop would have taken them from the cache
        s1 = tl.sum(q.to(tl.float32) * k_new.to(tl.float32)[None, :], axis=1) * scale
        if HAS_SOFTCAP:
            s1 = softcap * _tanh(s1 / softcap)
        m_new = tl.maximum(m_i, s1)
        p1 = tl.exp(s1 - m_new)
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + p1
        acc = acc * alpha[:, None] + p1.to(v_new.dtype).to(tl.float32)[:, None] * v_new.to(tl.float32)[None, :]
        m_i = m_new

    store_out(acc, m_i, l_i, b, heads, mask_r, offs_d, mask_d, head_dim, rep, split, num_splits, o_ptr, part_acc_ptr,
              part_ml_ptr, sinks_ptr, s_ob, s_oh, s_od, HAS_SINKS, SPLIT)


def rope_paged_decode(q, k, v, positions, inv_freq, k_cache, v_cache, slot_mapping, block_tables, context_lens,
                      scale, sliding_window=None, softcap=None, sinks=None, scaling=1.0, q_norm=None, k_norm=None,
                      eps=1e-6, multiply_in_float32=False, rotary_dim=None):
    """Same arguments and result as kernels.reference.rope_paged_decode."""
    B, hq, D = q.shape
    hkv = k.shape[1]
    R = D if rotary_dim is None else int(rotary_dim)
    if (B == 0 or R % 2 or R > D or inv_freq.numel() != R // 2 or hq % hkv or k.shape[0] != B
            or (sinks is not None and sinks.numel() != hq)):
        from .paged_attention_decode import paged_attention_decode
        from .qk_norm_rope import qk_norm_rope_kv_write

        q = qk_norm_rope_kv_write(q, k, v, positions, inv_freq, k_cache, v_cache, slot_mapping, scaling, q_norm,
                                  k_norm, eps, multiply_in_float32, rotary_dim)
        return paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale, sliding_window,
                                      softcap, sinks)
    rep = hq // hkv
    page_size = k_cache.shape[1]
    out = torch.empty_like(q)
    tables = block_tables.to(device=q.device, dtype=torch.int32)
    ctx = context_lens.to(device=q.device, dtype=torch.int32)
    block_d = next_pow2(D, 16)
    block_t = TOKENS_PER_BLOCK if block_d <= 128 else TOKENS_PER_BLOCK // 2
    max_tokens = tables.shape[1] * page_size  # bounds every context without reading context_lens back
    splits = _num_splits(q.device, B * hkv, max_tokens, block_t)
    tokens_per_split = -(-max_tokens // (splits * block_t)) * block_t
    split = splits > 1
    part_acc = torch.empty((B * hq * splits, D) if split else (1,), device=q.device, dtype=torch.float32)
    part_ml = torch.empty((2 * B * hq * splits,) if split else (1,), device=q.device, dtype=torch.float32)
    sinks_arg = sinks.to(device=q.device).contiguous() if sinks is not None else part_ml  # unread without sinks
    qw = q_norm if q_norm is not None else q
    kw = k_norm if k_norm is not None else k
    _rope_paged_decode_kernel[(B, hkv, splits)](
        q, k, v, positions, inv_freq, qw, kw, slot_mapping, k_cache, v_cache, tables, ctx, out, part_acc, part_ml,
        sinks_arg, float(scale), float(softcap or 1.0), int(sliding_window or 0), float(eps), float(scaling), D, R,
        page_size, rep, tokens_per_split, splits, *q.stride(), *k.stride(), *v.stride(), *k_cache.stride(),
        *v_cache.stride(), *tables.stride(), *out.stride(),
        HAS_QN=q_norm is not None, HAS_KN=k_norm is not None, F32_MUL=bool(multiply_in_float32),
        HAS_WINDOW=sliding_window is not None, HAS_SOFTCAP=softcap is not None, HAS_SINKS=sinks is not None,
        SPLIT=split, DOT_PRECISION="ieee" if k_cache.dtype == torch.float32 else "tf32",
        BLOCK_R=next_pow2(rep, 16), BLOCK_T=block_t, BLOCK_D=block_d, num_warps=num_warps(q.device.type, WARPS),
    )
    if split:
        _merge_splits_kernel[(B, hq)](
            part_acc, part_ml, out, sinks_arg, B * hq, splits, D, *out.stride(),
            HAS_SINKS=sinks is not None, BLOCK_S=next_pow2(splits), BLOCK_D=block_d,
            num_warps=num_warps(q.device.type, 4))
    return out
