"""One decode step of the depthwise causal conv1d for a batch of sequences, in one Triton kernel.

Per (sequence, block of channels): y = silu(bias + sum_k w[k] * window[k]) over the window of
the K-1 saved inputs and the new one; the saved inputs shift left by one. The reference needs a
concatenation, K multiply-adds and the activation as separate passes; this is one.

`short_conv_update_inplace` is the same step for LFM2's gated short conv: it reads B, C and x from
the in_proj output, convolves B * x and returns C * y, so the two gating products are no launches.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import num_warps


@triton.jit
def _conv_step_kernel(
    x_ptr, state_ptr, w_ptr, bias_ptr, y_ptr, new_state_ptr, slot_ptr,
    channels,
    s_xb, s_xc,
    s_sb, s_sc, s_sk,
    s_wc, s_wk,
    s_yb, s_yc,
    s_ob, s_oc, s_ok,
    WIDTH: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr, HAS_SLOTS: tl.constexpr,
    GATED: tl.constexpr, BLOCK_C: tl.constexpr,
):
    b = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = offs < channels
    if HAS_SLOTS:
        slot = tl.load(slot_ptr + b).to(tl.int64)
    else:
        slot = b.to(tl.int64)
    state_row = state_ptr + slot * s_sb + offs * s_sc
    out_row = new_state_ptr + slot * s_ob + offs * s_oc

    if HAS_BIAS:
        acc = tl.load(bias_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    else:
        acc = tl.zeros([BLOCK_C], dtype=tl.float32)
    # Read tap k before writing position k-1, so the in-place form (state is new_state) is safe.
    for k in tl.static_range(WIDTH - 1):
        v = tl.load(state_row + k * s_sk, mask=mask, other=0.0)
        acc += v.to(tl.float32) * tl.load(w_ptr + offs * s_wc + k * s_wk, mask=mask, other=0.0).to(tl.float32)
        if k > 0:
            tl.store(out_row + (k - 1) * s_ok, v.to(new_state_ptr.dtype.element_ty), mask=mask)
    x_row = x_ptr + b * s_xb
    if GATED:  # x_row is [B | C | x]: the conv input is B * x, rounded as the unfused product would be
        bg = tl.load(x_row + offs * s_xc, mask=mask, other=0.0)
        x = (bg.to(tl.float32) * tl.load(x_row + (2 * channels + offs) * s_xc, mask=mask, other=0.0).to(tl.float32)
             ).to(bg.dtype)
    else:
        x = tl.load(x_row + offs * s_xc, mask=mask, other=0.0)
    acc += x.to(tl.float32) * tl.load(w_ptr + offs * s_wc + (WIDTH - 1) * s_wk, mask=mask, other=0.0).to(tl.float32)
    if WIDTH > 1:
        tl.store(out_row + (WIDTH - 2) * s_ok, x.to(new_state_ptr.dtype.element_ty), mask=mask)
    if SILU:
        acc = acc * tl.sigmoid(acc)
    if GATED:
        gate = tl.load(x_row + (channels + offs) * s_xc, mask=mask, other=0.0)
        acc = acc.to(y_ptr.dtype.element_ty).to(tl.float32) * gate.to(tl.float32)
    tl.store(y_ptr + b * s_yb + offs * s_yc, acc.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, state, new_state, slots, weight, bias, activation, gated=False):
    if activation not in (None, "silu", "swish"):
        raise ValueError(f"causal conv1d: unsupported activation {activation!r}; use 'silu' or None")
    batch, channels = x.shape
    if gated:
        channels //= 3
    width = weight.shape[-1]
    y = torch.empty(batch, channels, dtype=x.dtype, device=x.device)
    block_c = 256
    if gated and width <= 1:
        raise ValueError("short_conv_update_inplace: the conv needs a window of at least 2")
    if batch and width > 1:
        _conv_step_kernel[(batch, triton.cdiv(channels, block_c))](
            x, state, weight, bias if bias is not None else weight, y, new_state,
            slots if slots is not None else x,
            channels, *x.stride(), *state.stride(), *weight.stride(), *y.stride(), *new_state.stride(),
            WIDTH=width, HAS_BIAS=bias is not None, SILU=activation is not None,
            HAS_SLOTS=slots is not None, GATED=gated, BLOCK_C=block_c, num_warps=num_warps(x.device.type, 4),
        )
    elif batch:  # a width-1 "convolution" has no state: leave it to torch
        y = (x.float() * weight[:, 0].float() + (bias.float() if bias is not None else 0.0))
        y = (torch.nn.functional.silu(y) if activation else y).to(x.dtype)
    return y


def causal_conv1d_update(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    activation: str | None = "silu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same arguments and results as `kernels.reference.causal_conv1d_update`: x [B, C],
    conv_state [B, C, K-1], weight [C, K]. Returns (y [B, C], new_state [B, C, K-1] in x's dtype)."""
    new_state = torch.empty(conv_state.shape, dtype=x.dtype, device=x.device)
    y = _launch(x, conv_state, new_state, None, weight, bias, activation)
    return y, new_state


def causal_conv1d_update_inplace(
    x: torch.Tensor,
    conv_states: torch.Tensor,
    slots: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    activation: str | None = "silu",
) -> torch.Tensor:
    """The same step on a state pool [num_slots, C, K-1]: sequence i uses and updates slot slots[i]
    in place. Returns y [B, C]."""
    slots = slots.to(device=x.device, dtype=torch.int64)
    return _launch(x, conv_states, conv_states, slots, weight, bias, activation)


def short_conv_update_inplace(
    bcx: torch.Tensor,
    conv_states: torch.Tensor,
    slots: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
) -> torch.Tensor:
    """Same arguments and result as kernels.reference.short_conv_update_inplace: bcx [B, 3C] (B, C and x
    side by side, LFM2's in_proj output), conv_states [num_slots, C, K-1] updated in place at `slots`.
    Returns C * conv(B * x) [B, C]."""
    if bcx.stride(-1) != 1:
        bcx = bcx.contiguous()
    slots = slots.to(device=bcx.device, dtype=torch.int64)
    return _launch(bcx, conv_states, conv_states, slots, weight, bias, None, gated=True)
