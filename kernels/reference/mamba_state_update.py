"""One decode step of the Mamba2 recurrence for a batch of sequences."""

from __future__ import annotations

import torch

from .mamba_dt import mamba_dt


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
    """state [B, H, P, N], x [B, H, P], dt [B, H] (raw), A [H], B and C [B, G, N], D [H].

    S' = exp(dt A) S + dt x B^T;  y = S' C + D x.  Returns (y [B, H, P] in x's dtype,
    new_state [B, H, P, N] in state's dtype); the caller writes new_state back to its slots.
    """
    H = x.shape[1]
    G = B.shape[1]
    dt = mamba_dt(dt, dt_bias, dt_softplus, dt_limit)  # [B, H]
    Bh = B.float().repeat_interleave(H // G, dim=1)  # [B, H, N]
    Ch = C.float().repeat_interleave(H // G, dim=1)
    decay = torch.exp(dt * A.float())[..., None, None]
    new_state = state.float() * decay + (dt[..., None] * x.float())[..., None] * Bh[:, :, None, :]
    y = (new_state * Ch[:, :, None, :]).sum(-1)  # [B, H, P]
    if D is not None:
        y = y + D.float()[:, None] * x.float()
    return y.to(x.dtype), new_state.to(state.dtype)
