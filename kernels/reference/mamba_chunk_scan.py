"""The Mamba2 selective scan over one sequence, computed chunk by chunk (SSD).

Recurrence per head h (state S is [P, N]):  S_t = exp(dt_t * A) * S_{t-1} + dt_t * x_t B_t^T,
y_t = S_t C_t + D * x_t. Inside a chunk of L tokens the outputs are a masked "attention"
C_l . B_s weighted by the decay between s and l; across chunks only the states at chunk
boundaries are carried, so the work is matrix products instead of T sequential steps.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .mamba_dt import mamba_dt


def ssd_scan(
    xf: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, Bh: torch.Tensor, Ch: torch.Tensor, chunk_size: int,
    initial_state: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The scan for a batch of equally long sequences, in float32, without the D skip.

    xf [b, T, H, P], dt [b, T, H] (final time steps; 0 on padding), A [H], Bh and Ch [b, T, H, N]
    (already one per head), initial_state [b, H, P, N] or None. Returns (y [b, T, H, P],
    final_state [b, H, P, N]).
    """
    b, T, H, P = xf.shape
    N = Bh.shape[-1]
    # Chunking is only a way of computing: a sequence shorter than a chunk is one chunk of its own
    # length, which saves padding a 20-token prompt to 128.
    L = min(int(chunk_size), T)
    # Pad to whole chunks with dt = 0: a padded step neither decays nor feeds the state.
    pad = (-T) % L
    if pad:
        xf, Bh, Ch = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (xf, Bh, Ch))
        dt = F.pad(dt, (0, 0, 0, pad))
    nc = (T + pad) // L
    xdt = (xf * dt[..., None]).view(b, nc, L, H, P)  # input scaled by its time step
    Bc, Cc = Bh.reshape(b, nc, L, H, N), Ch.reshape(b, nc, L, H, N)
    a_cum = torch.cumsum((dt * A.float()).view(b, nc, L, H), dim=2)  # log-decay from chunk start

    # 1. Within each chunk: y_l = sum_{s<=l} (C_l . B_s) exp(a_l - a_s) xdt_s.
    diff = a_cum[:, :, :, None, :] - a_cum[:, :, None, :, :]  # [b, nc, l, s, H]
    causal = torch.ones(L, L, dtype=torch.bool, device=xf.device).tril()
    decay = torch.exp(diff.masked_fill(~causal[:, :, None], float("-inf")))
    scores = torch.einsum("bclhn,bcshn->bclsh", Cc, Bc) * decay
    y = torch.einsum("bclsh,bcshp->bclhp", scores, xdt)

    # 2. Each chunk's own contribution to the state at its end.
    to_end = torch.exp(a_cum[:, :, -1:, :] - a_cum)  # [b, nc, L, H]
    chunk_states = torch.einsum("bclhn,bclh,bclhp->bchpn", Bc, to_end, xdt)

    # 3. Carry the state across chunk boundaries (nc steps, not T).
    state = xf.new_zeros(b, H, P, N) if initial_state is None else initial_state.float()
    starts = []
    chunk_decay = torch.exp(a_cum[:, :, -1, :])  # [b, nc, H]
    for c in range(nc):
        starts.append(state)
        state = state * chunk_decay[:, c, :, None, None] + chunk_states[:, c]
    start_states = torch.stack(starts, dim=1)  # [b, nc, H, P, N]

    # 4. The carried-in state seen from each position: C_l . (exp(a_l) S_start).
    y = y + torch.einsum("bclhn,bchpn->bclhp", Cc, start_states) * torch.exp(a_cum)[..., None]
    return y.reshape(b, nc * L, H, P)[:, :T], state


def mamba_chunk_scan(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    chunk_size: int,
    D: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    dt_softplus: bool = True,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, H, P], dt [T, H] (raw), A [H] (negative), B and C [T, G, N] with H a multiple of G,
    D [H], dt_bias [H], initial_state [H, P, N] or None (zeros).

    Returns (y [T, H, P] in x's dtype, final_state [H, P, N] in float32).
    """
    H, G = x.shape[1], B.shape[1]
    dt = mamba_dt(dt, dt_bias, dt_softplus, dt_limit)  # [T, H]
    Bh = B.float().repeat_interleave(H // G, dim=1)  # [T, H, N]
    Ch = C.float().repeat_interleave(H // G, dim=1)
    y, state = ssd_scan(x.float()[None], dt[None], A, Bh[None], Ch[None], chunk_size,
                        None if initial_state is None else initial_state[None])
    y = y[0]
    if D is not None:
        y = y + D.float()[:, None] * x.float()
    return y.to(x.dtype), state[0]
