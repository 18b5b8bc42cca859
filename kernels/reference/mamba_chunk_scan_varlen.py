"""The Mamba2 chunked scan over several sequences of different lengths in one call.

Sequences lie back to back in the token axis (`seq_starts`, B + 1 offsets, as the engine's
batches hold them). They are padded to the longest one with dt = 0, which leaves a state
untouched, so each sequence's final state is exact; outputs on padding are dropped.
"""

from __future__ import annotations

from typing import Sequence

import torch

from .mamba_chunk_scan import ssd_scan
from .mamba_dt import mamba_dt
from .varlen import pad_index


def mamba_chunk_scan_varlen(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    seq_starts: Sequence[int],
    chunk_size: int,
    D: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    dt_softplus: bool = True,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, H, P], dt [T, H] (raw), B and C [T, G, N], seq_starts (B + 1 ints), initial_states
    [B, H, P, N] or None (zeros for all; pass zeros rows for sequences that start fresh).

    Returns (y [T, H, P] in x's dtype, final_states [B, H, P, N] in float32).
    """
    H, G = x.shape[1], B.shape[1]
    rows, cols, nseq, tmax = pad_index(seq_starts, x.device)
    dt = mamba_dt(dt, dt_bias, dt_softplus, dt_limit)

    def padded(t: torch.Tensor) -> torch.Tensor:
        out = t.new_zeros(nseq, tmax, *t.shape[1:])
        out[rows, cols] = t
        return out

    Bh = B.float().repeat_interleave(H // G, dim=1)
    Ch = C.float().repeat_interleave(H // G, dim=1)
    y, states = ssd_scan(padded(x.float()), padded(dt), A, padded(Bh), padded(Ch), chunk_size, initial_states)
    y = y[rows, cols]
    if D is not None:
        y = y + D.float()[:, None] * x.float()
    return y.to(x.dtype), states
