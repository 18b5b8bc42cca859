"""The Mamba2 prompt scan on the CPU for prompts that fit in one chunk, in a few batched products.

The reference (kernels/reference/mamba_chunk_scan.py, SSD) repeats B and C per head and runs
five-operand einsums over [sequences, chunks, L, L, heads], with copies between them: the largest
part of a CPU engine's prompt step (about 5 ms per layer for 16 prompts of 16 to 64 tokens). When
every sequence fits in one chunk (prompts up to the model's chunk_size) the same sums are, per
sequence and head (a = cumsum(dt * A)):
    y_l = sum_{s<=l} (C_l . B_s) exp(a_l - a_s) dt_s x_s  +  exp(a_l) C_l . S0
    S   = exp(a_end) S0 + sum_s exp(a_end - a_s) dt_s x_s B_s^T,
computed here with C . B once per group (not per head), the [l, s] decays built in place, and
batched products over (sequence, group), in float32 like the reference. Longer prompts run the
reference.

Decays between distant tokens can fall below float32's normal range, where the CPU's exp and each
product with its result run about 30 times slower (denormal numbers): exponents are floored at
EXP_FLOOR, so such a term is at most 4e-18 of itself undecayed instead of about 0, far under the
resolution of a sum that holds its own token's undecayed term.
"""

from __future__ import annotations

import torch

from ..reference.mamba_chunk_scan_varlen import mamba_chunk_scan_varlen as reference
from ..reference.mamba_dt import mamba_dt
from ..reference.varlen import pad_index

EXP_FLOOR = -40.0  # exp(-40) = 4e-18: no product with a floored decay comes near the denormal range


def mamba_chunk_scan_varlen(x, dt, A, B, C, seq_starts, chunk_size, D=None, dt_bias=None, initial_states=None,
                            dt_softplus=True, dt_limit=(0.0, float("inf"))):
    """As the reference: x [T, H, P], dt [T, H] (raw), B and C [T, G, N], seq_starts (n + 1 offsets),
    initial_states [n, H, P, N] or None. Returns (y [T, H, P] in x's dtype, final states [n, H, P, N] float32)."""
    rows, cols, n, L = pad_index(seq_starts, x.device)
    if L > chunk_size:
        return reference(x, dt, A, B, C, seq_starts, chunk_size, D, dt_bias, initial_states, dt_softplus, dt_limit)
    H, P = x.shape[1], x.shape[2]
    G, N = B.shape[1], B.shape[2]
    per_group = H // G
    dt = mamba_dt(dt, dt_bias, dt_softplus, dt_limit)  # [T, H] float32
    xf = x.float()

    def padded(t: torch.Tensor) -> torch.Tensor:  # [T, ...] -> [n, L, ...]; padding has dt = 0: no decay, no input
        out = t.new_zeros(n, L, *t.shape[1:])
        out[rows, cols] = t
        return out

    xdt = padded(xf * dt[..., None]).transpose(1, 2)  # [n, H, L, P]
    Bg = padded(B.float()).transpose(1, 2)  # [n, G, L, N]
    Cg = padded(C.float()).transpose(1, 2)
    a = torch.cumsum(padded(dt * A.float()), dim=1).transpose(1, 2).contiguous()  # [n, H, L] log-decay from the start
    decay = a[..., :, None] - a[..., None, :]  # [n, H, l, s]: log-decay from s to l (<= 0 where s <= l)
    decay.clamp_(EXP_FLOOR, 0.0).exp_().masked_fill_(~torch.ones(L, L, dtype=torch.bool, device=x.device).tril(), 0.0)
    decay.view(n, G, per_group, L, L).mul_((Cg @ Bg.transpose(-1, -2))[:, :, None])  # times C_l . B_s of the group
    y = decay @ xdt  # [n, H, L, P]
    to_end = (a[..., -1:] - a).clamp_(min=EXP_FLOOR).exp_()  # [n, H, L]
    fed = (xdt * to_end[..., None]).reshape(n, G, per_group, L, P)
    state = (fed.transpose(-1, -2) @ Bg[:, :, None]).reshape(n, H, P, N)  # sum_s to_end_s xdt_s B_s^T
    if initial_states is not None:
        s0 = initial_states.float()  # [n, H, P, N]
        seen = Cg[:, :, None] @ s0.view(n, G, per_group, P, N).transpose(-1, -2)  # [n, G, hpg, L, P]: C_l . S0
        y = y + seen.reshape(n, H, L, P) * a.clamp(min=EXP_FLOOR).exp_()[..., None]
        state = state + s0 * a[..., -1:, None].clamp(min=EXP_FLOOR).exp_()
    y = y.transpose(1, 2)[rows, cols]  # [T, H, P]
    if D is not None:
        y = y + D.float()[:, None] * xf
    return y.to(x.dtype), state
