"""Batched decode attention over the paged KV cache in one Triton kernel (GQA, optional window).

One program per (request, KV head) walks that request's pages through its block table with an
online softmax, for all the query heads that share the KV head at once (so each K/V element is
read once, not once per query head). The reference gathers every request's pages to the longest
table in float32 first.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import next_pow2, num_warps


@triton.jit
def _paged_decode_kernel(
    q_ptr, k_ptr, v_ptr, table_ptr, ctx_ptr, o_ptr,
    scale, window, head_dim, page_size, rep,
    s_qb, s_qh, s_qd,
    s_kp, s_ko, s_kh, s_kd,
    s_vp, s_vo, s_vh, s_vd,
    s_tb, s_tp,
    s_ob, s_oh, s_od,
    HAS_WINDOW: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    ctx = tl.load(ctx_ptr + b).to(tl.int32)
    offs_r = tl.arange(0, BLOCK_R)
    offs_d = tl.arange(0, BLOCK_D)
    mask_r = offs_r < rep
    mask_d = offs_d < head_dim
    heads = kv_head * rep + offs_r
    q = tl.load(q_ptr + b * s_qb + heads[:, None] * s_qh + offs_d[None, :] * s_qd,
                mask=mask_r[:, None] & mask_d[None, :], other=0.0)
    q = q.to(k_ptr.dtype.element_ty)

    first = 0
    if HAS_WINDOW:
        first = tl.maximum(ctx - window, 0)
    m_i = tl.full([BLOCK_R], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_R], dtype=tl.float32)
    acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)
    # Start at the block holding `first`: that block has a visible token, so m_i is finite after it.
    for start in range((first // BLOCK_T) * BLOCK_T, ctx, BLOCK_T):
        t = start + tl.arange(0, BLOCK_T)
        visible = (t < ctx) & (t >= first)
        page = tl.load(table_ptr + b * s_tb + (t // page_size) * s_tp, mask=visible, other=0).to(tl.int64)
        off = t % page_size
        kv_mask = visible[:, None] & mask_d[None, :]
        k = tl.load(k_ptr + page[:, None] * s_kp + off[:, None] * s_ko + kv_head * s_kh + offs_d[None, :] * s_kd,
                    mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + page[:, None] * s_vp + off[:, None] * s_vo + kv_head * s_vh + offs_d[None, :] * s_vd,
                    mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale  # [BLOCK_R, BLOCK_T]
        s = tl.where(visible[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + b * s_ob + heads[:, None] * s_oh + offs_d[None, :] * s_od,
             out.to(o_ptr.dtype.element_ty), mask=mask_r[:, None] & mask_d[None, :])


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Same arguments and result as `kernels.reference.paged_attention_decode`: q [B, Hq, D],
    k/v_cache [num_pages, page_size, Hkv, D], block_tables [B, max_pages], context_lens [B]."""
    batch, hq, head_dim = q.shape
    _, page_size, hkv, _ = k_cache.shape
    if hq % hkv:
        raise ValueError(f"paged attention: {hq} query heads are not a multiple of {hkv} KV heads")
    rep = hq // hkv
    out = torch.empty_like(q)
    if batch == 0:
        return out
    tables = block_tables.to(device=q.device, dtype=torch.int32)
    ctx = context_lens.to(device=q.device, dtype=torch.int32)
    block_d = next_pow2(head_dim, 16)
    block_t = 64 if block_d <= 128 else 32
    _paged_decode_kernel[(batch, hkv)](
        q, k_cache, v_cache, tables, ctx, out,
        float(scale), int(sliding_window or 0), head_dim, page_size, rep,
        *q.stride(), *k_cache.stride(), *v_cache.stride(), *tables.stride(), *out.stride(),
        HAS_WINDOW=sliding_window is not None,
        DOT_PRECISION="ieee" if k_cache.dtype == torch.float32 else "tf32",
        BLOCK_R=next_pow2(rep, 16), BLOCK_T=block_t, BLOCK_D=block_d,
        num_warps=num_warps(q.device.type, 4),
    )
    return out
