"""One Mamba2 decode step for a batch of sequences in one Triton kernel.

Per (sequence, head, block of head dims): S' = exp(dt A) S + dt x B^T, y = S' C + D x, with dt's
bias, softplus and clamp fused in. The state tile is read once and written once, which is all
the memory traffic this op needs; the reference makes several full passes over the state.

`mamba_state_update` keeps the reference's signature (returns a new state).
`mamba_state_update_inplace` updates the state pool's own slots where they lie.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import next_pow2, num_warps


# State elements per program and warps: chosen, not swept (bench/kernels_gpu.py times the result).
TILE_ELEMENTS, WARPS = 4096, 4


@triton.jit
def _mamba_step_kernel(
    state_ptr, new_state_ptr, slot_ptr,
    x_ptr, dt_ptr, a_ptr, b_ptr, c_ptr, d_ptr, dt_bias_ptr, y_ptr,
    P, N, heads_per_group,
    s_sb, s_sh, s_sp, s_sn,
    s_ob, s_oh, s_op, s_on,
    s_xb, s_xh, s_xp,
    s_dtb, s_dth,
    s_bb, s_bg, s_bn,
    s_cb, s_cg, s_cn,
    s_yb, s_yh, s_yp,
    dt_lo, dt_hi,
    HAS_SLOTS: tl.constexpr, HAS_D: tl.constexpr, HAS_DT_BIAS: tl.constexpr,
    DT_SOFTPLUS: tl.constexpr, DT_CLAMP: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs_p = tl.program_id(2) * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_n = tl.arange(0, BLOCK_N)
    mask_p = offs_p < P
    mask_n = offs_n < N
    mask = mask_p[:, None] & mask_n[None, :]
    if HAS_SLOTS:
        slot = tl.load(slot_ptr + b).to(tl.int64)
    else:
        slot = b.to(tl.int64)

    dt = tl.load(dt_ptr + b * s_dtb + h * s_dth).to(tl.float32)
    if HAS_DT_BIAS:
        dt += tl.load(dt_bias_ptr + h).to(tl.float32)
    if DT_SOFTPLUS:  # torch's softplus: identity above 20
        dt = tl.where(dt > 20.0, dt, tl.log(1.0 + tl.exp(dt)))
    if DT_CLAMP:
        dt = tl.minimum(tl.maximum(dt, dt_lo), dt_hi)
    decay = tl.exp(dt * tl.load(a_ptr + h).to(tl.float32))

    g = h // heads_per_group
    x = tl.load(x_ptr + b * s_xb + h * s_xh + offs_p * s_xp, mask=mask_p, other=0.0).to(tl.float32)
    B = tl.load(b_ptr + b * s_bb + g * s_bg + offs_n * s_bn, mask=mask_n, other=0.0).to(tl.float32)
    C = tl.load(c_ptr + b * s_cb + g * s_cg + offs_n * s_cn, mask=mask_n, other=0.0).to(tl.float32)

    tile = offs_p[:, None] * s_sp + offs_n[None, :] * s_sn
    S = tl.load(state_ptr + slot * s_sb + h * s_sh + tile, mask=mask, other=0.0).to(tl.float32)
    S = S * decay + (dt * x)[:, None] * B[None, :]
    out_tile = offs_p[:, None] * s_op + offs_n[None, :] * s_on
    tl.store(new_state_ptr + slot * s_ob + h * s_oh + out_tile,
             S.to(new_state_ptr.dtype.element_ty), mask=mask)

    y = tl.sum(S * C[None, :], axis=1)
    if HAS_D:
        y += tl.load(d_ptr + h).to(tl.float32) * x
    tl.store(y_ptr + b * s_yb + h * s_yh + offs_p * s_yp, y.to(y_ptr.dtype.element_ty), mask=mask_p)


def _launch(state, new_state, slots, x, dt, A, B, C, D, dt_bias, dt_softplus, dt_limit):
    batch, H, P = x.shape
    G, N = B.shape[1], B.shape[2]
    if H % G:
        raise ValueError(f"mamba_state_update: {H} heads are not a multiple of {G} groups")
    y = torch.empty_like(x)
    block_n = next_pow2(N, 16)
    block_p = max(1, min(next_pow2(P), TILE_ELEMENTS // block_n))
    lo, hi = float(dt_limit[0]), float(dt_limit[1])
    clamp = lo > 0.0 or hi != float("inf")
    grid = (batch, H, triton.cdiv(P, block_p))
    if batch:
        _mamba_step_kernel[grid](
            state, new_state, slots if slots is not None else x,
            x, dt, A, B, C, D if D is not None else A, dt_bias if dt_bias is not None else A, y,
            P, N, H // G,
            *state.stride(), *new_state.stride(), *x.stride(), *dt.stride(), *B.stride(), *C.stride(),
            *y.stride(),
            lo, hi if hi != float("inf") else 3.0e38,
            HAS_SLOTS=slots is not None, HAS_D=D is not None, HAS_DT_BIAS=dt_bias is not None,
            DT_SOFTPLUS=bool(dt_softplus), DT_CLAMP=clamp,
            BLOCK_P=block_p, BLOCK_N=block_n, num_warps=num_warps(x.device.type, WARPS),
        )
    return y


def mamba_state_update(
    state: torch.Tensor,
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = True,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same arguments and results as `kernels.reference.mamba_state_update`: state [B, H, P, N],
    x [B, H, P], dt [B, H], B and C [B, G, N]. Returns (y [B, H, P], new_state in state's dtype)."""
    new_state = torch.empty_like(state)
    y = _launch(state, new_state, None, x, dt, A, B, C, D, dt_bias, dt_softplus, dt_limit)
    return y, new_state


def mamba_state_update_inplace(
    ssm_states: torch.Tensor,
    slots: torch.Tensor,
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = True,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
) -> torch.Tensor:
    """The same step on a state pool [num_slots, H, P, N]: sequence i's state is slot slots[i],
    read and overwritten in place (no gather, no scatter). Returns y [B, H, P]."""
    slots = slots.to(device=x.device, dtype=torch.int64)
    return _launch(ssm_states, ssm_states, slots, x, dt, A, B, C, D, dt_bias, dt_softplus, dt_limit)
