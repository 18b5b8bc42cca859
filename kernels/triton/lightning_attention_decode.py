"""One lightning-attention decode token per request in one Triton kernel, the state pool updated where
it lies (MiniMax-M1 / Text-01; reference: kernels/reference/lightning_attention.py).

Per (request, head, block of value dims): S <- exp(-slope_h) S + k v^T, o = S^T q. The state tile is
read once and written once, which is all the memory traffic the op needs; the reference gathers the
slots into float32, makes several passes and scatters them back.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import next_pow2, num_warps

# State elements per program and warps: chosen as the Mamba2 step's (mamba_state_update.py), not swept.
TILE_ELEMENTS, WARPS = 4096, 4


@triton.jit
def _lightning_step_kernel(
    state_ptr, slot_ptr, q_ptr, k_ptr, v_ptr, slope_ptr, o_ptr,
    DK, DV,
    s_sn, s_sh, s_sk, s_sv,
    s_qb, s_qh, s_kb, s_kh, s_vb, s_vh, s_ob, s_oh,
    BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):
    b, h, vb = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    slot = tl.load(slot_ptr + b).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    offs_v = vb * BLOCK_V + tl.arange(0, BLOCK_V)
    mask_k, mask_v = offs_k < DK, offs_v < DV
    q = tl.load(q_ptr + b * s_qb + h * s_qh + offs_k, mask=mask_k, other=0.0).to(tl.float32)
    k = tl.load(k_ptr + b * s_kb + h * s_kh + offs_k, mask=mask_k, other=0.0).to(tl.float32)
    v = tl.load(v_ptr + b * s_vb + h * s_vh + offs_v, mask=mask_v, other=0.0).to(tl.float32)
    decay = tl.exp(-tl.load(slope_ptr + h).to(tl.float32))
    tile = slot * s_sn + h * s_sh + offs_k[:, None] * s_sk + offs_v[None, :] * s_sv
    mask = mask_k[:, None] & mask_v[None, :]
    S = tl.load(state_ptr + tile, mask=mask, other=0.0).to(tl.float32)
    S = decay * S + k[:, None] * v[None, :]
    tl.store(state_ptr + tile, S.to(state_ptr.dtype.element_ty), mask=mask)
    o = tl.sum(q[:, None] * S, axis=0)
    tl.store(o_ptr + b * s_ob + h * s_oh + offs_v, o.to(o_ptr.dtype.element_ty), mask=mask_v)


def lightning_attention_recurrent_inplace(q, k, v, slopes, states, slots):
    """Same arguments and result as the reference: q/k [B, H, dk], v [B, H, dv], slopes [H],
    states [num_slots, H, dk, dv] updated in place at `slots` [B]; returns o [B, H, dv] in v's dtype."""
    B, H, DV = v.shape
    DK = q.shape[-1]
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:  # (head dims are read as contiguous rows)
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty(B, H, DV, dtype=v.dtype, device=v.device)
    if B == 0:
        return o
    slots = slots.to(device=v.device, dtype=torch.int64)
    slopes = slopes.to(device=v.device, dtype=torch.float32)
    block_k = next_pow2(DK, 16)  # the whole key dim per program: o sums over it
    block_v = max(16, min(next_pow2(DV), TILE_ELEMENTS // block_k))
    grid = (B, H, triton.cdiv(DV, block_v))
    _lightning_step_kernel[grid](
        states, slots, q, k, v, slopes, o, DK, DV,
        *states.stride(), q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        o.stride(0), o.stride(1),
        BLOCK_K=block_k, BLOCK_V=block_v, num_warps=num_warps(v.device.type, WARPS),
    )
    return o
