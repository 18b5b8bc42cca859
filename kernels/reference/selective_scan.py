"""Mamba (v1) selective scan, the plain way: one recurrence step at a time (Jamba's Mamba layers).

Per channel d and state n, with dt = softplus(dt + dt_bias):
    h_t[d, n] = exp(dt_t[d] * A[d, n]) * h_{t-1}[d, n] + dt_t[d] * x_t[d] * B_t[n]
    y_t[d]    = sum_n h_t[d, n] * C_t[n] + D[d] * x_t[d],   then y_t *= silu(z_t) when z is given.
Unlike Mamba2 (mamba_chunk_scan), A is a full [channels, d_state] matrix and B, C have no heads or
groups. This reference steps through time once for all sequences of a batch together (padded
layout), so its Python loop runs over the longest prompt's tokens: correct everywhere, slow for long
prompts. A fast (Triton / chunked) version registers over it in dispatch.py and is tested against it.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from .varlen import pad_index


def _dt(dt: torch.Tensor, dt_bias: torch.Tensor | None, softplus: bool) -> torch.Tensor:
    dt = dt.float() + (dt_bias.float() if dt_bias is not None else 0.0)
    return F.softplus(dt) if softplus else dt


def selective_state_update(
    state: torch.Tensor,
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step for a batch: state [b, D, N] (float32), x/dt/z [b, D], A [D, N], B/C [b, N].
    Returns (y [b, D] in x's dtype, new state [b, D, N] float32)."""
    dt = _dt(dt, dt_bias, dt_softplus)
    xf = x.float()
    state = torch.exp(dt[..., None] * A.float()) * state.float() + (dt * xf)[..., None] * B.float()[:, None, :]
    y = torch.einsum("bdn,bn->bd", state, C.float())
    if D is not None:
        y = y + D.float() * xf
    if z is not None:
        y = y * F.silu(z.float())
    return y.to(x.dtype), state


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
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences back to back: x/dt/z [T, D], B/C [T, N], seq_starts (n + 1 offsets), A [D, N],
    initial_states [n, D, N] or None (zeros). Returns (y [T, D], final states [n, D, N] float32)."""
    rows, cols, nseq, tmax = pad_index(seq_starts, x.device)
    width, N = x.shape[1], A.shape[1]

    def padded(t: torch.Tensor) -> torch.Tensor:  # [T, k] -> [n, tmax, k], zeros past each end
        out = t.new_zeros(nseq, tmax, t.shape[1])
        out[rows, cols] = t
        return out

    # Padding steps have dt = 0: no decay, no input, so a shorter sequence's state stays its final one.
    step = padded(_dt(dt, dt_bias, dt_softplus))
    xs, Bs, Cs = padded(x.float()), padded(B.float()), padded(C.float())
    state = x.new_zeros(nseq, width, N, dtype=torch.float32) if initial_states is None else initial_states.float().clone()
    Af = A.float()
    ys = []
    for t in range(tmax):
        d = step[:, t]
        state = torch.exp(d[..., None] * Af) * state + (d * xs[:, t])[..., None] * Bs[:, t, None, :]
        ys.append(torch.einsum("bdn,bn->bd", state, Cs[:, t]))
    y = torch.stack(ys, dim=1)[rows, cols]  # back to [T, D]
    if D is not None:
        y = y + D.float() * x.float()
    if z is not None:
        y = y * F.silu(z.float())
    return y.to(x.dtype), state
