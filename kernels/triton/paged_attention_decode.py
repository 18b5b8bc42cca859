"""Batched decode attention over the paged KV cache in Triton (GQA, optional sliding window, score
soft-capping as Gemma 2's, attention sinks as gpt-oss's).

One program per (request, KV head, slice of the context) walks its pages through the block table
with an online softmax, for all the query heads that share the KV head at once (so each K/V
element is read once, not once per query head). Slicing the context ("split-K", as in
flash-decoding) keeps the GPU busy when requests times KV heads are fewer than its cores; a second
small kernel merges the slices' partial softmaxes. A sink is a per-head logit that joins the softmax's
denominator only (a key whose value is zero), so it enters once, where the row's softmax is finished:
at the end of the single-slice kernel or in the merge. The reference gathers every request's pages to
the longest table in float32 first.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import compute_units, next_pow2, num_warps


@triton.jit
def _tanh(x):
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)  # saturates to +-1 (exp overflows to inf, or to 0)


@triton.jit
def program_rows(ctx_ptr, rep, head_dim, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    """A decode program's (request, KV head, context slice), the request's context length, and the
    lanes of its query heads and channels."""
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    offs_r = tl.arange(0, BLOCK_R)
    offs_d = tl.arange(0, BLOCK_D)
    return (b, kv_head, tl.program_id(2), tl.load(ctx_ptr + b).to(tl.int32), offs_r, offs_d, offs_r < rep,
            offs_d < head_dim, kv_head * rep + offs_r)


@triton.jit
def attend_pages(q, k_ptr, v_ptr, table_ptr, b, kv_head, lo, hi, scale, softcap, page_size, offs_d, mask_d,
                 s_kp, s_ko, s_kh, s_kd, s_vp, s_vo, s_vh, s_vd, s_tb, s_tp, HAS_SOFTCAP: tl.constexpr,
                 DOT_PRECISION: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    """The online softmax of q [BLOCK_R, BLOCK_D] over the cached tokens lo..hi of request b's pages, KV
    head kv_head: (running max, denominator, weighted values) per query head."""
    m_i = tl.full([BLOCK_R], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_R], dtype=tl.float32)
    acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)
    for start in range((lo // BLOCK_T) * BLOCK_T, hi, BLOCK_T):
        t = start + tl.arange(0, BLOCK_T)
        visible = (t >= lo) & (t < hi)
        page = tl.load(table_ptr + b * s_tb + (t // page_size) * s_tp, mask=visible, other=0).to(tl.int64)
        off = t % page_size
        kv_mask = visible[:, None] & mask_d[None, :]
        k = tl.load(k_ptr + page[:, None] * s_kp + off[:, None] * s_ko + kv_head * s_kh + offs_d[None, :] * s_kd,
                    mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + page[:, None] * s_vp + off[:, None] * s_vo + kv_head * s_vh + offs_d[None, :] * s_vd,
                    mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale  # [BLOCK_R, BLOCK_T]
        if HAS_SOFTCAP:
            s = softcap * _tanh(s / softcap)
        s = tl.where(visible[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a block with nothing visible adds nothing
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new
    return m_i, l_i, acc


@triton.jit
def store_out(acc, m_i, l_i, b, heads, mask_r, offs_d, mask_d, head_dim, rep, split, num_splits, o_ptr,
              part_acc_ptr, part_ml_ptr, sinks_ptr, s_ob, s_oh, s_od, HAS_SINKS: tl.constexpr, SPLIT: tl.constexpr):
    """A program's softmax to the output (the sinks joining its denominator), or its slice's partial results."""
    out_mask = mask_r[:, None] & mask_d[None, :]
    if SPLIT:  # partial results [B, Hq, splits, D] and [2, B, Hq, splits] (m, l), merged after
        row = (b * rep * tl.num_programs(1) + heads) * num_splits + split
        tl.store(part_acc_ptr + row[:, None] * head_dim + offs_d[None, :], acc, mask=out_mask)
        tl.store(part_ml_ptr + row, m_i, mask=mask_r)
        tl.store(part_ml_ptr + tl.num_programs(0) * rep * tl.num_programs(1) * num_splits + row, l_i, mask=mask_r)
    else:
        if HAS_SINKS:
            sink = tl.load(sinks_ptr + heads, mask=mask_r, other=0.0).to(tl.float32)
            m_all = tl.maximum(m_i, sink)
            alpha = tl.exp(m_i - m_all)
            out = acc * alpha[:, None] / (l_i * alpha + tl.exp(sink - m_all))[:, None]
        else:
            out = acc / l_i[:, None]
        tl.store(o_ptr + b * s_ob + heads[:, None] * s_oh + offs_d[None, :] * s_od,
                 out.to(o_ptr.dtype.element_ty), mask=out_mask)


# Per-call sizes (the context slices, the block table's width) are not specialized on: a mixed
# prompt+decode step brings new values every step, and each new divisibility was a fresh compile
# (0.6 s on the H200) in the middle of serving.
@triton.jit(do_not_specialize=["tokens_per_split", "num_splits", "s_tb"])
def _paged_decode_kernel(
    q_ptr, k_ptr, v_ptr, table_ptr, ctx_ptr, o_ptr, part_acc_ptr, part_ml_ptr, sinks_ptr,
    scale, softcap, window, head_dim, page_size, rep, tokens_per_split, num_splits,
    s_qb, s_qh, s_qd,
    s_kp, s_ko, s_kh, s_kd,
    s_vp, s_vo, s_vh, s_vd,
    s_tb, s_tp,
    s_ob, s_oh, s_od,
    HAS_WINDOW: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HAS_SINKS: tl.constexpr, SPLIT: tl.constexpr,
    DOT_PRECISION: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    b, kv_head, split, ctx, offs_r, offs_d, mask_r, mask_d, heads = program_rows(ctx_ptr, rep, head_dim, BLOCK_R,
                                                                                 BLOCK_D)
    q = tl.load(q_ptr + b * s_qb + heads[:, None] * s_qh + offs_d[None, :] * s_qd,
                mask=mask_r[:, None] & mask_d[None, :], other=0.0)
    q = q.to(k_ptr.dtype.element_ty)

    lo = split * tokens_per_split  # tokens_per_split is a multiple of BLOCK_T
    hi = tl.minimum(lo + tokens_per_split, ctx)
    if HAS_WINDOW:
        lo = tl.maximum(lo, ctx - window)
    m_i, l_i, acc = attend_pages(q, k_ptr, v_ptr, table_ptr, b, kv_head, lo, hi, scale, softcap, page_size, offs_d,
                                 mask_d, s_kp, s_ko, s_kh, s_kd, s_vp, s_vo, s_vh, s_vd, s_tb, s_tp, HAS_SOFTCAP,
                                 DOT_PRECISION, BLOCK_R, BLOCK_T, BLOCK_D)

    store_out(acc, m_i, l_i, b, heads, mask_r, offs_d, mask_d, head_dim, rep, split, num_splits, o_ptr, part_acc_ptr,
              part_ml_ptr, sinks_ptr, s_ob, s_oh, s_od, HAS_SINKS, SPLIT)


@triton.jit(do_not_specialize=["num_rows", "num_splits"])
def _merge_splits_kernel(
    part_acc_ptr, part_ml_ptr, o_ptr, sinks_ptr, num_rows, num_splits, head_dim,
    s_ob, s_oh, s_od,
    HAS_SINKS: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    row = b * tl.num_programs(1) + h
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    mask_s = offs_s < num_splits
    m = tl.load(part_ml_ptr + row * num_splits + offs_s, mask=mask_s, other=float("-inf"))
    l = tl.load(part_ml_ptr + num_rows * num_splits + row * num_splits + offs_s, mask=mask_s, other=0.0)
    acc = tl.load(part_acc_ptr + (row * num_splits + offs_s[:, None]) * head_dim + offs_d[None, :],
                  mask=mask_s[:, None] & (offs_d[None, :] < head_dim), other=0.0)
    m_all = tl.max(m, axis=0)  # finite: every request has at least one visible token
    if HAS_SINKS:
        sink = tl.load(sinks_ptr + h).to(tl.float32)
        m_all = tl.maximum(m_all, sink)
    w = tl.exp(m - m_all)  # 0 for slices that saw nothing
    denominator = tl.sum(l * w, axis=0)
    if HAS_SINKS:
        denominator += tl.exp(sink - m_all)
    out = tl.sum(acc * w[:, None], axis=0) / denominator
    tl.store(o_ptr + b * s_ob + h * s_oh + offs_d * s_od, out.to(o_ptr.dtype.element_ty), mask=offs_d < head_dim)


# Tiling: tokens per block, warps, programs per core; chosen, not swept (bench/kernels_gpu.py times it).
TOKENS_PER_BLOCK, WARPS, PROGRAMS_PER_CORE = 64, 4, 4


def _num_splits(device, programs: int, max_tokens: int, block_t: int) -> int:
    """Enough context slices for PROGRAMS_PER_CORE programs per core, none shorter than 4 blocks."""
    want = -(-PROGRAMS_PER_CORE * compute_units(device) // max(programs, 1))
    return max(1, min(want, max_tokens // (4 * block_t), 64))


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    sliding_window: int | None = None,
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Same arguments and result as `kernels.reference.paged_attention_decode`: q [B, Hq, D],
    k/v_cache [num_pages, page_size, Hkv, D], block_tables [B, max_pages], context_lens [B],
    softcap (scores become softcap * tanh(scores / softcap)), sinks [Hq] (one logit per query head)."""
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
    block_t = TOKENS_PER_BLOCK if block_d <= 128 else TOKENS_PER_BLOCK // 2
    # The table's width bounds every context without reading context_lens back to the host.
    max_tokens = tables.shape[1] * page_size
    splits = _num_splits(q.device, batch * hkv, max_tokens, block_t)
    tokens_per_split = -(-max_tokens // (splits * block_t)) * block_t
    split = splits > 1
    part_acc = torch.empty((batch * hq * splits, head_dim) if split else (1,), device=q.device, dtype=torch.float32)
    part_ml = torch.empty((2 * batch * hq * splits,) if split else (1,), device=q.device, dtype=torch.float32)
    if sinks is not None and sinks.numel() != hq:
        raise ValueError(f"paged attention: {sinks.numel()} sinks for {hq} query heads")
    sinks_arg = sinks.to(device=q.device).contiguous() if sinks is not None else part_ml  # unread without sinks
    _paged_decode_kernel[(batch, hkv, splits)](
        q, k_cache, v_cache, tables, ctx, out, part_acc, part_ml, sinks_arg,
        float(scale), float(softcap or 1.0), int(sliding_window or 0), head_dim, page_size, rep, tokens_per_split,
        splits, *q.stride(), *k_cache.stride(), *v_cache.stride(), *tables.stride(), *out.stride(),
        HAS_WINDOW=sliding_window is not None, HAS_SOFTCAP=softcap is not None, HAS_SINKS=sinks is not None,
        SPLIT=split,
        DOT_PRECISION="ieee" if k_cache.dtype == torch.float32 else "tf32",
        BLOCK_R=next_pow2(rep, 16), BLOCK_T=block_t, BLOCK_D=block_d,
        num_warps=num_warps(q.device.type, WARPS),
    )
    if split:
        _merge_splits_kernel[(batch, hq)](
            part_acc, part_ml, out, sinks_arg, batch * hq, splits, head_dim, *out.stride(),
            HAS_SINKS=sinks is not None, BLOCK_S=next_pow2(splits), BLOCK_D=block_d,
            num_warps=num_warps(q.device.type, 4),
        )
    return out
