"""Mamba (v1) selective scan in Triton (Jamba's Mamba layers): a prompt in one kernel, and a decode step.

One program per (sequence, block of channels) keeps its [channels, d_state] state tile in registers
and walks the sequence's tokens: per token it reads x, dt, z (a few channels) and B, C (d_state
numbers) and writes y, so the state never goes to memory between tokens. Time stays sequential
inside a program; sequences and channel blocks run side by side. dt's bias and softplus (torch's,
linear above 20), D and the silu(z) gate are fused in.

Same arguments and results as `kernels.reference.selective_scan_varlen` (which the tests hold it to,
and whose `chunk` argument it ignores). The decode step (`selective_state_update`, and its in-place
form on the state pool's slots) reads each state tile once and writes it once, with the same fusions.
`selective_state_update_lowrank_inplace` is that step from x_proj's output (Jamba's decode): the dt/B/C
RMSNorms and dt_proj's low-rank product run inside it, five launches in one.
"""

from __future__ import annotations

from typing import Sequence

import torch
import triton
import triton.language as tl

from ..reference.varlen import int_tensor
from .launch import next_pow2, num_warps

# State elements per program and warps: chosen, not swept.
TILE_ELEMENTS, WARPS = 2048, 4


@triton.jit
def _selective_scan_kernel(
    x_ptr, dt_ptr, a_ptr, b_ptr, c_ptr, d_ptr, z_ptr, dt_bias_ptr, h0_ptr, starts_ptr, y_ptr, h_ptr,
    width, N,
    s_xt, s_dtt, s_bt, s_ct, s_zt, s_yt,
    HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_DT_BIAS: tl.constexpr, HAS_H0: tl.constexpr,
    DT_SOFTPLUS: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
):
    seq = tl.program_id(0)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N)
    mask_d = offs_d < width
    mask_n = offs_n < N
    mask = mask_d[:, None] & mask_n[None, :]
    tile = offs_d[:, None] * N + offs_n[None, :]  # A, h0 and the final states are [.., D, N], contiguous
    A = tl.load(a_ptr + tile, mask=mask, other=0.0).to(tl.float32)
    if HAS_H0:
        h = tl.load(h0_ptr + seq * width * N + tile, mask=mask, other=0.0).to(tl.float32)
    else:
        h = tl.zeros([BLOCK_D, BLOCK_N], dtype=tl.float32)
    if HAS_DT_BIAS:
        dt_bias = tl.load(dt_bias_ptr + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    if HAS_D:
        Dv = tl.load(d_ptr + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    start = tl.load(starts_ptr + seq).to(tl.int64)
    end = tl.load(starts_ptr + seq + 1).to(tl.int64)
    for t in range(start, end):
        x = tl.load(x_ptr + t * s_xt + offs_d, mask=mask_d, other=0.0).to(tl.float32)
        dt = tl.load(dt_ptr + t * s_dtt + offs_d, mask=mask_d, other=0.0).to(tl.float32)
        if HAS_DT_BIAS:
            dt += dt_bias
        if DT_SOFTPLUS:  # torch's softplus (identity above 20); log1p by Kahan's trick, exact for small e^dt
            u = tl.exp(dt)
            w = 1.0 + u
            dt = tl.where(dt > 20.0, dt, tl.where(w == 1.0, u, tl.log(w) * u / (w - 1.0)))
        B = tl.load(b_ptr + t * s_bt + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        C = tl.load(c_ptr + t * s_ct + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        h = tl.exp(dt[:, None] * A) * h + (dt * x)[:, None] * B[None, :]
        y = tl.sum(h * C[None, :], axis=1)
        if HAS_D:
            y += Dv * x
        if HAS_Z:
            z = tl.load(z_ptr + t * s_zt + offs_d, mask=mask_d, other=0.0).to(tl.float32)
            y *= z / (1.0 + tl.exp(-z))
        tl.store(y_ptr + t * s_yt + offs_d, y.to(y_ptr.dtype.element_ty), mask=mask_d)
    tl.store(h_ptr + seq * width * N + tile, h, mask=mask)


def selective_scan_varlen(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    seq_starts: Sequence[int],
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    dt_softplus: bool = True,
    chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x/dt/z [T, D], B/C [T, N], seq_starts (n + 1 offsets), A [D, N], initial_states [n, D, N] or
    None. Returns (y [T, D] in x's dtype, final states [n, D, N] float32)."""
    T, width = x.shape
    N = A.shape[1]
    nseq = len(seq_starts) - 1
    y = torch.empty_like(x)
    finals = torch.empty(nseq, width, N, device=x.device, dtype=torch.float32)
    if nseq == 0:
        return y, finals
    for name, t in (("x", x), ("dt", dt), ("B", B), ("C", C), ("z", z)):
        if t is not None and t.stride(-1) != 1:
            raise ValueError(f"selective scan: {name} must be contiguous in its last dimension")
    starts = int_tensor([int(s) for s in seq_starts], x.device)
    A = A.float().contiguous()
    h0 = initial_states.float().contiguous() if initial_states is not None else finals  # unread without
    block_n = next_pow2(N)
    block_d = min(next_pow2(width), max(16, TILE_ELEMENTS // block_n))
    _selective_scan_kernel[(nseq, triton.cdiv(width, block_d))](
        x, dt, A, B, C, D if D is not None else A, z if z is not None else x,
        dt_bias if dt_bias is not None else A, h0, starts, y, finals,
        width, N, x.stride(0), dt.stride(0), B.stride(0), C.stride(0), (z if z is not None else x).stride(0),
        y.stride(0),
        HAS_D=D is not None, HAS_Z=z is not None, HAS_DT_BIAS=dt_bias is not None,
        HAS_H0=initial_states is not None, DT_SOFTPLUS=dt_softplus, BLOCK_D=block_d, BLOCK_N=block_n,
        num_warps=num_warps(x.device.type, WARPS),
    )
    return y, finals


@triton.jit
def _softplus(dt):
    """log(1 + e^dt) in float32 without overflow (dt past 20 passes through)."""
    u = tl.exp(dt)
    w = 1.0 + u
    return tl.where(dt > 20.0, dt, tl.where(w == 1.0, u, tl.log(w) * u / (w - 1.0)))


@triton.jit
def _store_output(S, C, x, d_ptr, z_row, y_row, offs_d, mask_d, HAS_D: tl.constexpr, HAS_Z: tl.constexpr):
    """A decode step's output from its new state tile: y = S C (+ D x) (* silu(z)), stored to y_row."""
    y = tl.sum(S * C[None, :], axis=1)
    if HAS_D:
        y += tl.load(d_ptr + offs_d, mask=mask_d, other=0.0).to(tl.float32) * x
    if HAS_Z:
        z = tl.load(z_row + offs_d, mask=mask_d, other=0.0).to(tl.float32)
        y *= z / (1.0 + tl.exp(-z))
    tl.store(y_row + offs_d, y.to(y_row.dtype.element_ty), mask=mask_d)


@triton.jit
def _selective_step_kernel(
    state_ptr, new_state_ptr, slot_ptr, x_ptr, dt_ptr, a_ptr, b_ptr, c_ptr, d_ptr, z_ptr, dt_bias_ptr, y_ptr,
    width, N,
    s_sb, s_sd, s_sn, s_ob, s_od, s_on,
    s_xb, s_dtb, s_bb, s_cb, s_zb, s_yb,
    HAS_SLOTS: tl.constexpr, HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_DT_BIAS: tl.constexpr,
    DT_SOFTPLUS: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
):
    b = tl.program_id(0)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N)
    mask_d = offs_d < width
    mask_n = offs_n < N
    mask = mask_d[:, None] & mask_n[None, :]
    if HAS_SLOTS:
        slot = tl.load(slot_ptr + b).to(tl.int64)
    else:
        slot = b.to(tl.int64)
    A = tl.load(a_ptr + offs_d[:, None] * N + offs_n[None, :], mask=mask, other=0.0).to(tl.float32)
    S = tl.load(state_ptr + slot * s_sb + offs_d[:, None] * s_sd + offs_n[None, :] * s_sn, mask=mask,
                other=0.0).to(tl.float32)
    x = tl.load(x_ptr + b * s_xb + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    dt = tl.load(dt_ptr + b * s_dtb + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    if HAS_DT_BIAS:
        dt += tl.load(dt_bias_ptr + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    if DT_SOFTPLUS:
        dt = _softplus(dt)
    B = tl.load(b_ptr + b * s_bb + offs_n, mask=mask_n, other=0.0).to(tl.float32)
    C = tl.load(c_ptr + b * s_cb + offs_n, mask=mask_n, other=0.0).to(tl.float32)
    S = tl.exp(dt[:, None] * A) * S + (dt * x)[:, None] * B[None, :]
    tl.store(new_state_ptr + slot * s_ob + offs_d[:, None] * s_od + offs_n[None, :] * s_on,
             S.to(new_state_ptr.dtype.element_ty), mask=mask)
    _store_output(S, C, x, d_ptr, z_ptr + b * s_zb, y_ptr + b * s_yb, offs_d, mask_d, HAS_D, HAS_Z)


def _step(state, new_state, slots, x, dt, A, B, C, D, z, dt_bias, dt_softplus):
    batch, width = x.shape
    N = A.shape[1]
    y = torch.empty_like(x)
    if batch == 0:
        return y
    for name, t in (("x", x), ("dt", dt), ("B", B), ("C", C), ("z", z)):
        if t is not None and t.stride(-1) != 1:
            raise ValueError(f"selective state update: {name} must be contiguous in its last dimension")
    A = A.float().contiguous()
    block_n = next_pow2(N)
    block_d = min(next_pow2(width), max(16, TILE_ELEMENTS // block_n))
    zz = z if z is not None else x
    _selective_step_kernel[(batch, triton.cdiv(width, block_d))](
        state, new_state, slots if slots is not None else x, x, dt, A, B, C, D if D is not None else A, zz,
        dt_bias if dt_bias is not None else A, y, width, N, *state.stride(), *new_state.stride(),
        x.stride(0), dt.stride(0), B.stride(0), C.stride(0), zz.stride(0), y.stride(0),
        HAS_SLOTS=slots is not None, HAS_D=D is not None, HAS_Z=z is not None, HAS_DT_BIAS=dt_bias is not None,
        DT_SOFTPLUS=bool(dt_softplus), BLOCK_D=block_d, BLOCK_N=block_n, num_warps=num_warps(x.device.type, WARPS),
    )
    return y


def selective_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=True):
    """`kernels.reference.selective_state_update`'s arguments and results: (y [b, D], new state [b, D, N] float32)."""
    new_state = torch.empty(state.shape, device=state.device, dtype=torch.float32)
    return _step(state, new_state, None, x, dt, A, B, C, D, z, dt_bias, dt_softplus), new_state


def selective_state_update_inplace(ssm_states, slots, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=True):
    """One decode step on the state pool's own slots (ssm_states [num_slots, D, N], slots [b] int64):
    each state tile is read once and written back where it lies. Returns y [b, D]."""
    return _step(ssm_states, ssm_states, slots, x, dt, A, B, C, D, z, dt_bias, dt_softplus)


# Weight elements per chunk of the low-rank dt product (a BLOCK_D x BLOCK_R register tile beside the
# BLOCK_D x N state tile): chosen, not swept.
LOWRANK_TILE = 4096


@triton.jit
def _rounded(v, rdt: tl.constexpr, BF16: tl.constexpr):
    """float32 v rounded to rdt and back. bfloat16 by its bits (round to nearest even, as torch's cast;
    Triton's interpreter casts by truncation, so the interpreted kernel would drift from the reference)."""
    if BF16:
        bits = v.to(tl.uint32, bitcast=True)
        bits = (bits + (0x7FFF + ((bits >> 16) & 1))) & 0xFFFF0000
        return bits.to(tl.float32, bitcast=True)
    else:
        return v.to(rdt).to(tl.float32)


@triton.jit
def _selective_step_lowrank_kernel(
    state_ptr, slot_ptr, x_ptr, xdbl_ptr, w_ptr, a_ptr, d_ptr, z_ptr, dt_bias_ptr, dtw_ptr, bw_ptr, cw_ptr, y_ptr,
    width, N, R, eps,
    s_sb, s_sd, s_sn, s_xb, s_xdb, s_wd, s_wr, s_zb, s_yb,
    HAS_NORM: tl.constexpr, BF16: tl.constexpr, ROUND_IN: tl.constexpr, ROUND_NORM: tl.constexpr,
    ROUND_DT: tl.constexpr, HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_DT_BIAS: tl.constexpr,
    DT_SOFTPLUS: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr,
):
    b = tl.program_id(0)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N)
    offs_r = tl.arange(0, BLOCK_R)
    mask_d = offs_d < width
    mask_n = offs_n < N
    mask = mask_d[:, None] & mask_n[None, :]
    slot = tl.load(slot_ptr + b).to(tl.int64)
    row = xdbl_ptr + b * s_xdb  # dt_low [R] | B [N] | C [N]
    rdt = xdbl_ptr.dtype.element_ty  # the reference's rounding points: the norms' and dt_proj's outputs
    B = tl.load(row + R + offs_n, mask=mask_n, other=0.0).to(tl.float32)
    C = tl.load(row + R + N + offs_n, mask=mask_n, other=0.0).to(tl.float32)
    if HAS_NORM:  # RMSNorms in float32, each program its own (R + 2N numbers, cheaper than a launch)
        ss = tl.zeros([BLOCK_R], dtype=tl.float32)
        for r0 in range(0, R, BLOCK_R):
            v = tl.load(row + r0 + offs_r, mask=r0 + offs_r < R, other=0.0).to(tl.float32)
            ss += v * v
        dt_rstd = 1.0 / tl.sqrt(tl.sum(ss, axis=0) / R + eps)
        B = B * (1.0 / tl.sqrt(tl.sum(B * B, axis=0) / N + eps))
        C = C * (1.0 / tl.sqrt(tl.sum(C * C, axis=0) / N + eps))
        if ROUND_IN:
            B = _rounded(B, rdt, BF16)
            C = _rounded(C, rdt, BF16)
        B = B * tl.load(bw_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        C = C * tl.load(cw_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)
        if ROUND_NORM:
            B = _rounded(B, rdt, BF16)
            C = _rounded(C, rdt, BF16)
    # dt for this block's channels: normed dt_low @ W[channels, :R]^T, R in chunks
    dt = tl.zeros([BLOCK_D], dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rr = r0 + offs_r
        mr = rr < R
        v = tl.load(row + rr, mask=mr, other=0.0).to(tl.float32)
        if HAS_NORM:
            v = v * dt_rstd
            if ROUND_IN:
                v = _rounded(v, rdt, BF16)
            v = v * tl.load(dtw_ptr + rr, mask=mr, other=0.0).to(tl.float32)
            if ROUND_NORM:
                v = _rounded(v, rdt, BF16)
        wt = tl.load(w_ptr + offs_d[:, None] * s_wd + rr[None, :] * s_wr, mask=mask_d[:, None] & mr[None, :],
                     other=0.0).to(tl.float32)
        dt += tl.sum(wt * v[None, :], axis=1)
    if ROUND_DT:
        dt = _rounded(dt, rdt, BF16)
    # the state update, as _selective_step_kernel's
    A = tl.load(a_ptr + offs_d[:, None] * N + offs_n[None, :], mask=mask, other=0.0).to(tl.float32)
    S = tl.load(state_ptr + slot * s_sb + offs_d[:, None] * s_sd + offs_n[None, :] * s_sn, mask=mask,
                other=0.0).to(tl.float32)
    x = tl.load(x_ptr + b * s_xb + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    if HAS_DT_BIAS:
        dt += tl.load(dt_bias_ptr + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    if DT_SOFTPLUS:
        dt = _softplus(dt)
    S = tl.exp(dt[:, None] * A) * S + (dt * x)[:, None] * B[None, :]
    tl.store(state_ptr + slot * s_sb + offs_d[:, None] * s_sd + offs_n[None, :] * s_sn,
             S.to(state_ptr.dtype.element_ty), mask=mask)
    _store_output(S, C, x, d_ptr, z_ptr + b * s_zb, y_ptr + b * s_yb, offs_d, mask_d, HAS_D, HAS_Z)


def selective_state_update_lowrank_inplace(ssm_states, slots, x, x_dbl, dt_proj_weight, A, D=None, z=None,
                                           dt_bias=None, dt_softplus=True, norm_weights=None, eps=1e-6):
    """`kernels.reference.selective_state_update_lowrank_inplace` in one launch: each program (batch row,
    block of channels) norms dt_low, B, C from x_dbl [b, R + 2N] (x_proj's output), forms dt for its
    channels from dt_proj_weight [D, R], and steps its state tile where it lies. Returns y [b, D]."""
    batch, width = x.shape
    N, R = A.shape[1], dt_proj_weight.shape[1]
    y = torch.empty_like(x)
    if batch == 0:
        return y
    for name, t in (("x", x), ("x_dbl", x_dbl), ("z", z)):
        if t is not None and t.stride(-1) != 1:
            raise ValueError(f"selective state update (low rank): {name} must be contiguous in its last "
                             "dimension")
    if x_dbl.shape[-1] != R + 2 * N:
        raise ValueError(f"selective state update (low rank): x_dbl has {x_dbl.shape[-1]} columns, "
                         f"not R + 2N = {R + 2 * N}")
    A = A.float().contiguous()
    block_n = next_pow2(N)
    block_d = min(next_pow2(width), max(16, TILE_ELEMENTS // block_n))
    block_r = min(next_pow2(R), max(16, LOWRANK_TILE // block_d))
    # Where the reference rounds (kernels/reference/rms_norm.py, F.linear): the normed value to the
    # input's dtype, the weight product to the promoted dtype, dt_proj's output to its input's dtype
    # (an input in float32 rounds nowhere).
    low = x_dbl.dtype != torch.float32
    if norm_weights is not None:
        dt_w, b_w, c_w = norm_weights
        round_norm = low and dt_w.dtype == x_dbl.dtype  # (torch.promote_types would count as a launch)
    else:
        dt_w = b_w = c_w = A
        round_norm = False
    round_dt = round_norm if norm_weights is not None else low
    zz = z if z is not None else x
    _selective_step_lowrank_kernel[(batch, triton.cdiv(width, block_d))](
        ssm_states, slots, x, x_dbl, dt_proj_weight, A, D if D is not None else A, zz,
        dt_bias if dt_bias is not None else A, dt_w, b_w, c_w, y,
        width, N, R, float(eps), *ssm_states.stride(), x.stride(0), x_dbl.stride(0), *dt_proj_weight.stride(),
        zz.stride(0), y.stride(0),
        HAS_NORM=norm_weights is not None, BF16=x_dbl.dtype == torch.bfloat16,
        ROUND_IN=low and norm_weights is not None, ROUND_NORM=round_norm, ROUND_DT=round_dt,
        HAS_D=D is not None, HAS_Z=z is not None, HAS_DT_BIAS=dt_bias is not None,
        DT_SOFTPLUS=bool(dt_softplus), BLOCK_D=block_d, BLOCK_N=block_n, BLOCK_R=block_r,
        num_warps=num_warps(x.device.type, WARPS),
    )
    return y
