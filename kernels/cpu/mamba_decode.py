"""The Mamba2 decode step's two pool ops on the CPU, updating the pool where it lies when it can.

Same arithmetic as kernels/reference/{causal_conv1d_update,mamba_state_update}_inplace.py, which
gather the batch's slots, step them and scatter them back. On the CPU a decode batch's slots are
most often one ascending run (the first requests take slots 0, 1, 2...; a request alone is a run
of one): then the pool rows are a view, updated in place, and the gather and scatter (two copies
of every state, per layer and step) go; the arithmetic is the reference's, in its order
(tests/kernels/test_kernels_cpu.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..reference.mamba_dt import mamba_dt


_LAST_RUN: list = [None, None]  # [slots tensor, its run]: every Mamba layer of a step asks about the same tensor


def slot_run(slots: torch.Tensor) -> tuple[int, int] | None:
    """(first, count) when `slots` are first, first + 1, ... in order; else None. The answer for the
    last tensor asked about is kept (a step's layers all pass the batch's one slots tensor).
    Always None inside a compiled step (core/engine/cpu_compiled_decode.py): it reads no values on
    the host there, and the compiler fuses the gather, the update and the scatter into one loop."""
    if torch.compiler.is_compiling():
        return None
    if _LAST_RUN[0] is slots and not slots.is_inference():  # (an inference tensor has no version)
        kept_version, run = _LAST_RUN[1]
        if kept_version == slots._version:
            return run
    ids = slots.tolist()
    first = ids[0] if ids else 0
    run = (first, len(ids)) if ids == list(range(first, first + len(ids))) else None
    if not slots.is_inference():
        _LAST_RUN[:] = [slots, (slots._version, run)]
    return run


def mamba_state_update_inplace(ssm_states, slots, x, dt, A, B, C, D=None, dt_bias=None, dt_softplus=True,
                               dt_limit=(0.0, float("inf"))):
    """As the reference: ssm_states [num_slots, H, P, N] updated in place at `slots`; returns y [B, H, P]."""
    n, H, P = x.shape
    G, N = B.shape[1], B.shape[2]
    per_group = H // G
    run = slot_run(slots) if ssm_states.dtype == torch.float32 else None
    state = ssm_states.narrow(0, *run) if run else ssm_states.index_select(0, slots).float()
    dt = mamba_dt(dt, dt_bias, dt_softplus, dt_limit)  # [n, H] float32
    xf = x.float()
    grouped = state.view(n, G, per_group, P, N)
    grouped.mul_(torch.exp(dt * A.float()).view(n, G, per_group, 1, 1))
    # S += (dt x) B^T in place: no [n, H, P, N] temporary (about a fifth of this op's time at 8 requests)
    grouped.addcmul_((dt[..., None] * xf).view(n, G, per_group, P, 1), B.float().view(n, G, 1, 1, N))
    if not run:
        ssm_states.index_copy_(0, slots, state.to(ssm_states.dtype))
    y = torch.linalg.vecdot(grouped, C.float().view(n, G, 1, 1, N)).view(n, H, P)  # S C, summed in one op
    if D is not None:
        y = torch.addcmul(y, D.float()[:, None], xf)
    return y.to(x.dtype)


def causal_conv1d_update_inplace(x, conv_states, slots, weight, bias, activation="silu"):
    """As the reference: x [B, C], conv_states [num_slots, C, K-1] updated in place at `slots`."""
    run = slot_run(slots)
    old = conv_states.narrow(0, *run) if run else conv_states.index_select(0, slots)
    window = torch.cat([old.to(x.dtype), x.unsqueeze(-1)], dim=-1)  # [B, C, K]
    if run:
        old.copy_(window[..., 1:])
    else:
        conv_states.index_copy_(0, slots, window[..., 1:].to(conv_states.dtype))
    # the K taps: a product and a sum over the last axis (84 against 112 us for linalg.vecdot at 8
    # requests, 384 channels and 4 taps, bit for bit the same)
    y = (window.to(weight.dtype) * weight).sum(-1)
    if bias is not None:
        y.add_(bias)
    if activation in ("silu", "swish"):
        y = F.silu(y, inplace=True)
    elif activation is not None:
        raise ValueError(f"causal conv1d: unsupported activation {activation!r}; use 'silu' or None")
    return y.to(x.dtype)
