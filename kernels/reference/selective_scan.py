"""Mamba (v1) selective scan (Jamba's Mamba layers).

Per channel d and state n, with dt = softplus(dt + dt_bias):
    h_t[d, n] = exp(dt_t[d] * A[d, n]) * h_{t-1}[d, n] + dt_t[d] * x_t[d] * B_t[n]
    y_t[d]    = sum_n h_t[d, n] * C_t[n] + D[d] * x_t[d],   then y_t *= silu(z_t) when z is given.
Unlike Mamba2 (mamba_chunk_scan), A is a full [channels, d_state] matrix and B, C have no heads or
groups, so the decay differs per (d, n) and Mamba2's chunk form (one decay per head, matmuls) does
not apply.

`selective_scan_varlen` (the op) scans a chunk of tokens at a time. With E_t = exp(A * cumsum(dt)_t)
(the decay from the chunk's start, in (0, 1]) and u_s = dt_s x_s B_s, the state inside a chunk is
    h_t = E_t * (h_start + sum_{s<=t} u_s / E_s),
one cumulative sum instead of a step per token. 1 / E_s grows with the chunk's total log-decay, so a
chunk ends before that passes LOG_LIMIT (e^60 is far from float32's overflow, and the products
E_t / E_s <= 1 keep float32's relative precision); a token that alone decays past it steps on its
own. Sequences run side by side in a padded layout (padding has dt = 0: no decay, no input).
`selective_scan_stepwise` is the plain one-token-at-a-time recurrence, kept as the oracle the tests
hold the op to.
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



def selective_state_update_inplace(
    ssm_states: torch.Tensor,
    slots: torch.Tensor,
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = True,
) -> torch.Tensor:
    """One step on a state pool: ssm_states [num_slots, D, N] (updated in place), slots [b] int64 on its
    device, the rest as `selective_state_update`. Returns y [b, D]. This form gathers and scatters; a
    fast one updates the slots where they lie (same signature, so the model has one code path)."""
    y, state = selective_state_update(ssm_states[slots], x, dt, A, B, C, D, z, dt_bias, dt_softplus)
    ssm_states[slots] = state.to(ssm_states.dtype)
    return y

def selective_scan_stepwise(
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
    """`selective_scan_varlen`'s arguments and results, one recurrence step at a time for all sequences
    together (padded layout): a Python loop over the longest sequence's tokens. The tests' oracle."""
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


LOG_LIMIT = 60.0  # the most log-decay one chunk may span (1 / E stays below e^60)
# Floats in one [chunk, sequences, D, N] block. On the CPU a block that stays in cache is what makes
# chunks pay (measured: bench/selective_scan.py); a GPU takes long chunks (fewer launches).
CHUNK_ELEMENTS = {"cpu": 1 << 16}
GPU_CHUNK_ELEMENTS = 1 << 22
MAX_CHUNK = 256


def chunk_bounds(step_bound: list[float], longest: int) -> list[tuple[int, int]]:
    """[start, end) chunks over positions 0..len(step_bound): at most `longest` tokens, and at most
    LOG_LIMIT of summed per-token log-decay bounds (a token past it alone is a chunk of one)."""
    bounds, start, total = [], 0, 0.0
    for t, b in enumerate(step_bound):
        if t > start and (t - start >= longest or total + b > LOG_LIMIT):
            bounds.append((start, t))
            start, total = t, 0.0
        total += b
    if start < len(step_bound):
        bounds.append((start, len(step_bound)))
    return bounds


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
    """Sequences back to back: x/dt/z [T, D], B/C [T, N], seq_starts (n + 1 offsets), A [D, N],
    initial_states [n, D, N] or None (zeros). Returns (y [T, D], final states [n, D, N] float32).
    `chunk`: the most tokens per chunk (default: as many as the device's block size allows)."""
    rows, cols, nseq, tmax = pad_index(seq_starts, x.device)
    width, N = x.shape[1], A.shape[1]

    def padded(t: torch.Tensor) -> torch.Tensor:  # [T, k] -> time-major [tmax, n, k], zeros past each end
        out = t.new_zeros(tmax, nseq, t.shape[1])
        out[cols, rows] = t
        return out

    delta = padded(_dt(dt, dt_bias, dt_softplus))
    u_in = delta * padded(x.float())  # dt x, [tmax, n, D]
    Bs, Cs, Af = padded(B.float()), padded(C.float()), A.float()
    state = x.new_zeros(nseq, width, N, dtype=torch.float32) if initial_states is None \
        else initial_states.float().clone()
    y = x.new_empty(tmax, nseq, width, dtype=torch.float32)
    budget = CHUNK_ELEMENTS.get(x.device.type, GPU_CHUNK_ELEMENTS)
    longest = chunk or max(1, min(MAX_CHUNK, budget // max(nseq * width * N, 1)))
    # Each token's largest log-decay over sequences and channels, read once: where the chunks end.
    step_bound = (delta * Af.abs().amax(dim=1)).amax(dim=(1, 2)).tolist() if longest > 1 else [0.0] * tmax
    for c0, c1 in chunk_bounds(step_bound, longest):
        if c1 - c0 == 1:
            state = torch.exp(delta[c0, :, :, None] * Af) * state + u_in[c0, :, :, None] * Bs[c0, :, None, :]
            y[c0] = torch.einsum("bdn,bn->bd", state, Cs[c0])
            continue
        E = torch.exp(delta[c0:c1].cumsum(0)[..., None] * Af)  # [l, n, D, N], in [e^-LOG_LIMIT, 1]
        h = (u_in[c0:c1, :, :, None] * Bs[c0:c1, :, None, :]).div_(E).cumsum_(0).add_(state).mul_(E)
        y[c0:c1] = torch.einsum("lbdn,lbn->lbd", h, Cs[c0:c1])
        state = h[-1]
    y = y[cols, rows]  # back to [T, D]
    if D is not None:
        y = y + D.float() * x.float()
    if z is not None:
        y = y * F.silu(z.float())
    return y.to(x.dtype), state
