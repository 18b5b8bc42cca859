"""One decode token of the gated delta rule (Qwen3-Next) and of KDA (Kimi-Linear) in one Triton kernel.

Per (request, value head, block of dv columns), with the state tile S [dk, BLOCK_V] in registers:
    q, k <- L2-normalised (qk_l2norm), q <- q * scale
    S <- exp(g) S            (g: one number per head, or one per key channel for KDA)
    u = beta (v - S^T k)     (the delta)
    S <- S + k u^T,  o = S^T q
The state is read once and written once where it lies in the pool (`states[slots]`), in its own
dtype, the arithmetic in float32. The wrappers around flash-linear-attention (kernels/fla/) gather
`states[slots]` into a float32 copy, run, and scatter back: three extra passes over the state and
several launches; this is one launch and the two passes the step needs.

Same arguments and results as kernels/reference/gated_delta_rule.py::gated_delta_rule_recurrent_inplace
and kernels/reference/kda.py::kda_recurrent_inplace. A slot < 0 counts from the end, as the
reference's `states[slots]` does (the decode graphs' padding rows have a real scratch slot).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import next_pow2, num_warps

# State elements per program (dk x BLOCK_V in float32 registers) and warps: at dk 128 that is
# BLOCK_V 32, so a head's 128 dv columns are 4 programs and batch 1 of 32 heads fills 128 SMs.
# Chosen, not swept (bench/delta_rule_decode.py times the result).
TILE_ELEMENTS, WARPS = 4096, 4


@triton.jit
def _delta_rule_step_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, state_ptr, slot_ptr, o_ptr,
    num_slots, DK, DV, heads_per_key, scale,
    s_qb, s_qh, s_qd,
    s_kb, s_kh, s_kd,
    s_vb, s_vh, s_vd,
    s_gb, s_gh, s_gd,
    s_bb, s_bh,
    s_sb, s_sh, s_sk, s_sv,
    s_ob, s_oh, s_od,
    PER_CHANNEL: tl.constexpr, L2NORM: tl.constexpr,
    BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs_k = tl.arange(0, BLOCK_K)
    offs_v = tl.program_id(2) * BLOCK_V + tl.arange(0, BLOCK_V)
    mask_k = offs_k < DK
    mask_v = offs_v < DV
    slot = tl.load(slot_ptr + b).to(tl.int64)
    slot = tl.where(slot < 0, slot + num_slots, slot)  # as torch indexing reads a negative slot

    hk = h // heads_per_key  # grouped value heads share a q/k head
    q = tl.load(q_ptr + b * s_qb + hk * s_qh + offs_k * s_qd, mask=mask_k, other=0.0).to(tl.float32)
    k = tl.load(k_ptr + b * s_kb + hk * s_kh + offs_k * s_kd, mask=mask_k, other=0.0).to(tl.float32)
    if L2NORM:  # every dv block normalises the whole row again: dk numbers, cheaper than a second launch
        q = q * tl.rsqrt(tl.sum(q * q, axis=0) + 1e-6)
        k = k * tl.rsqrt(tl.sum(k * k, axis=0) + 1e-6)
    q = q * scale
    v = tl.load(v_ptr + b * s_vb + h * s_vh + offs_v * s_vd, mask=mask_v, other=0.0).to(tl.float32)
    beta = tl.load(beta_ptr + b * s_bb + h * s_bh).to(tl.float32)
    if PER_CHANNEL:  # KDA: a decay per key channel, a row scale of S
        g = tl.load(g_ptr + b * s_gb + h * s_gh + offs_k * s_gd, mask=mask_k, other=0.0).to(tl.float32)
        decay = tl.exp(g)[:, None]
    else:
        decay = tl.exp(tl.load(g_ptr + b * s_gb + h * s_gh).to(tl.float32))

    mask = mask_k[:, None] & mask_v[None, :]
    tile = state_ptr + slot * s_sb + h * s_sh + offs_k[:, None] * s_sk + offs_v[None, :] * s_sv
    S = tl.load(tile, mask=mask, other=0.0).to(tl.float32) * decay
    u = beta * (v - tl.sum(k[:, None] * S, axis=0))
    S = S + k[:, None] * u[None, :]
    tl.store(tile, S.to(state_ptr.dtype.element_ty), mask=mask)
    o = tl.sum(q[:, None] * S, axis=0)  # from the float32 state, as the reference
    tl.store(o_ptr + b * s_ob + h * s_oh + offs_v * s_od, o.to(o_ptr.dtype.element_ty), mask=mask_v)


def _step(q, k, v, g, beta, states, slots, scale, qk_l2norm, per_channel, what):
    B, Hv, dv = v.shape
    Hk, dk = q.shape[1], q.shape[2]
    if Hv % Hk:
        raise ValueError(f"{what}: {Hv} value heads are not a multiple of {Hk} key heads")
    if per_channel and g.shape[-1] != dk:
        raise ValueError(f"{what}: the decay has {g.shape[-1]} channels per head, the keys {dk}")
    o = torch.empty(B, Hv, dv, dtype=v.dtype, device=v.device)
    if B == 0:
        return o
    slots = torch.as_tensor(slots, device=v.device).to(torch.int64)
    g3 = g if per_channel else g[..., None]  # one stride set for both decays
    block_k = next_pow2(dk, 16)
    block_v = max(16, min(next_pow2(dv, 16), TILE_ELEMENTS // block_k))
    grid = (B, Hv, triton.cdiv(dv, block_v))
    _delta_rule_step_kernel[grid](
        q, k, v, g3, beta, states, slots, o,
        states.shape[0], dk, dv, Hv // Hk, float(dk ** -0.5 if scale is None else scale),
        *q.stride(), *k.stride(), *v.stride(), *g3.stride(), *beta.stride(), *states.stride(), *o.stride(),
        PER_CHANNEL=per_channel, L2NORM=bool(qk_l2norm),
        BLOCK_K=block_k, BLOCK_V=block_v, num_warps=num_warps(v.device.type, WARPS),
    )
    return o


def gated_delta_rule_recurrent_inplace(q, k, v, g, beta, states, slots, scale=None, qk_l2norm=True):
    """q/k [B, Hk, dk], v [B, Hv, dv], g/beta [B, Hv], states [num_slots, Hv, dk, dv] (stepped in
    place at `slots` [B]). Returns o [B, Hv, dv] in v's dtype."""
    return _step(q, k, v, g, beta, states, slots, scale, qk_l2norm, False, "gated delta rule")


def kda_recurrent_inplace(q, k, v, g, beta, states, slots, scale=None, qk_l2norm=True):
    """As gated_delta_rule_recurrent_inplace with g [B, Hv, dk], a decay per key channel."""
    return _step(q, k, v, g, beta, states, slots, scale, qk_l2norm, True, "KDA")
