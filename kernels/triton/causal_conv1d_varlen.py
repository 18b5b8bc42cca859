"""Depthwise causal conv1d over several sequences back to back (a prefill chunk), in two Triton
kernels: one pass over the tokens, then each sequence's last K-1 inputs as its new state.

The reference (kernels/reference/causal_conv1d_varlen.py) pads every sequence to the longest,
concatenates the states, runs K shifted multiply-adds, the activation and two gathers: about a
dozen passes over a [T, C] tensor per layer (tens of ms per 8k-token chunk on an H200). Here each
output reads its K inputs straight from x, or from the sequence's saved state where the window
reaches back before the sequence's first token; accumulation is in float32.

`causal_conv1d_varlen_inplace` reads and writes the saved states where they lie in the state pool
(slot per sequence), as the Mamba2 mixer wants; `causal_conv1d_varlen` has the reference's signature.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference.varlen import int_tensor, pad_index
from .launch import num_warps


# T changes every step and is only a bound: not specialized on (a compile per divisibility otherwise).
@triton.jit(do_not_specialize=["T"])
def _conv_varlen_kernel(x_ptr, w_ptr, bias_ptr, state_ptr, slot_ptr, has_ptr, seq_ptr, starts_ptr, y_ptr,
                        T, C, s_xt, s_xc, s_wc, s_wk, s_sb, s_sc, s_sk, s_yt, s_yc,
                        WIDTH: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_STATE: tl.constexpr,
                        SILU: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr):
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    t_ok = t < T
    c_ok = c < C
    seq = tl.load(seq_ptr + t, mask=t_ok, other=0)
    start = tl.load(starts_ptr + seq, mask=t_ok, other=0)
    if HAS_STATE:
        slot = tl.load(slot_ptr + seq, mask=t_ok, other=0).to(tl.int64)
        has = tl.load(has_ptr + seq, mask=t_ok, other=0) != 0
    if HAS_BIAS:
        acc = tl.zeros([BLOCK_T, BLOCK_C], dtype=tl.float32) + tl.load(bias_ptr + c, mask=c_ok, other=0.0).to(tl.float32)[None, :]
    else:
        acc = tl.zeros([BLOCK_T, BLOCK_C], dtype=tl.float32)
    ok2 = t_ok[:, None] & c_ok[None, :]
    for k in tl.static_range(WIDTH):
        pos = t - (WIDTH - 1) + k  # the input tap k reads
        inside = pos >= start
        v = tl.load(x_ptr + pos.to(tl.int64)[:, None] * s_xt + c[None, :] * s_xc,
                    mask=ok2 & inside[:, None], other=0.0).to(tl.float32)
        if HAS_STATE:  # before the sequence's first token: its saved inputs (column pos - start + K-1)
            col = pos - start + (WIDTH - 1)
            sv = tl.load(state_ptr + slot[:, None] * s_sb + c[None, :] * s_sc + col[:, None] * s_sk,
                         mask=ok2 & (~inside & has)[:, None], other=0.0).to(tl.float32)
            v += sv
        w = tl.load(w_ptr + c * s_wc + k * s_wk, mask=c_ok, other=0.0).to(tl.float32)
        acc += v * w[None, :]
    if SILU:
        acc = acc * tl.sigmoid(acc)
    tl.store(y_ptr + t.to(tl.int64)[:, None] * s_yt + c[None, :] * s_yc, acc.to(y_ptr.dtype.element_ty), mask=ok2)


@triton.jit
def _conv_final_state_kernel(x_ptr, state_ptr, slot_ptr, has_ptr, starts_ptr, out_ptr, out_slot_ptr,
                             C, s_xt, s_xc, s_sb, s_sc, s_sk, s_ob, s_oc, s_ok,
                             WIDTH: tl.constexpr, HAS_STATE: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = c < C
    start = tl.load(starts_ptr + b)
    end = tl.load(starts_ptr + b + 1)
    out_slot = tl.load(out_slot_ptr + b).to(tl.int64)
    if HAS_STATE:
        slot = tl.load(slot_ptr + b).to(tl.int64)
        has = tl.load(has_ptr + b) != 0
    # Column j reads the old state's column L + j (L >= 1 tokens in the sequence) and is written after
    # that read, in increasing j: in place, no column is read after it was overwritten.
    for j in tl.static_range(WIDTH - 1):
        pos = end - (WIDTH - 1) + j
        if pos >= start:
            v = tl.load(x_ptr + pos.to(tl.int64) * s_xt + c * s_xc, mask=c_ok, other=0.0).to(tl.float32)
        else:
            v = tl.zeros([BLOCK_C], dtype=tl.float32)
            if HAS_STATE:
                if has:
                    v = tl.load(state_ptr + slot * s_sb + c * s_sc + (pos - start + WIDTH - 1) * s_sk,
                                mask=c_ok, other=0.0).to(tl.float32)
        tl.store(out_ptr + out_slot * s_ob + c * s_oc + j * s_ok, v.to(out_ptr.dtype.element_ty), mask=c_ok)


def _launch(x, seq_starts, weight, bias, states, slots, has, out_states, out_slots, activation):
    if activation not in (None, "silu", "swish"):
        raise ValueError(f"causal conv1d: unsupported activation {activation!r}; use 'silu' or None")
    T, C = x.shape
    K = weight.shape[-1]
    first = int(seq_starts[0])
    rel = [int(s) - first for s in seq_starts]
    B = len(rel) - 1
    y = torch.empty(T, C, dtype=x.dtype, device=x.device)
    if T == 0 or B == 0:
        return y
    seq, _cols, _n, _longest = pad_index(rel, x.device)
    starts = int_tensor(rel, x.device)
    has_state = states is not None
    st = states if has_state else y
    st_strides = states.stride() if has_state else (0, 0, 0)
    block_t, block_c = 32, 128
    _conv_varlen_kernel[(triton.cdiv(T, block_t), triton.cdiv(C, block_c))](
        x, weight, bias if bias is not None else weight, st, slots if has_state else starts,
        has if has_state else starts, seq, starts, y, T, C, x.stride(0), x.stride(1), weight.stride(0),
        weight.stride(1), *st_strides, y.stride(0), y.stride(1),
        WIDTH=K, HAS_BIAS=bias is not None, HAS_STATE=has_state, SILU=activation is not None,
        BLOCK_T=block_t, BLOCK_C=block_c, num_warps=num_warps(x.device.type, 4))
    if K > 1:
        _conv_final_state_kernel[(B, triton.cdiv(C, 256))](
            x, st, slots if has_state else starts, has if has_state else starts, starts, out_states, out_slots,
            C, x.stride(0), x.stride(1), *st_strides, *out_states.stride(),
            WIDTH=K, HAS_STATE=has_state, BLOCK_C=256, num_warps=num_warps(x.device.type, 4))
    return y


def causal_conv1d_varlen(x, seq_starts, weight, bias, initial_states, activation="silu"):
    """Same arguments and results as kernels.reference.causal_conv1d_varlen: x [T, C] (any strides),
    weight [C, K], initial_states [B, C, K-1] or None. Returns (y [T, C], final_states [B, C, K-1])."""
    B, C, K = len(seq_starts) - 1, x.shape[1], weight.shape[-1]
    final = torch.empty(B, C, K - 1, dtype=x.dtype, device=x.device)
    rows = torch.arange(B, device=x.device)
    ones = torch.ones(B, dtype=torch.int32, device=x.device) if initial_states is not None else None
    y = _launch(x, seq_starts, weight, bias, initial_states, rows if initial_states is not None else None, ones,
                final, rows, activation)
    return y, final


def causal_conv1d_varlen_inplace(x, seq_starts, weight, bias, conv_states, slots, has_state, activation="silu"):
    """Same as kernels.reference.causal_conv1d_varlen_inplace: sequence i starts from
    conv_states[slots[i]] where has_state[i] (else zeros) and leaves its last K-1 inputs there."""
    slots = slots.to(device=x.device, dtype=torch.int64)
    has = has_state.to(device=x.device, dtype=torch.int32)
    return _launch(x, seq_starts, weight, bias, conv_states, slots, has, conv_states, slots, activation)
