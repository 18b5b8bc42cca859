"""The Mamba2 chunked scan through flash-linear-attention's `chunk_simple_gla`.

Mamba2's SSD is gated linear attention with one scalar decay per head and token:
    S_t = exp(g_t) S_{t-1} + v_t k_t^T,  o_t = scale * S_t q_t
with q = C, k = B, v = dt * x, g = dt * A (a natural-log decay; fla turns it into exp2 inside) and
scale = 1. fla wants [batch, T, H, ...] (sequence-first), one q/k per head (so B and C are
broadcast from their groups to the heads) and, with `state_v_first=True`, a state laid out
[H, V, K] = [H, P, N], which is our SSM state's layout. Its final state is float32.
"""

from __future__ import annotations

import torch
from fla.ops.simple_gla import chunk_simple_gla

from ..reference.mamba_dt import mamba_dt
from ..reference.varlen import int_tensor

# fla's own tuned chunk length; the chunking is only a way of computing and changes no result.
FLA_CHUNK = 64


def _per_head(t: torch.Tensor, heads: int) -> torch.Tensor:
    """[T, G, N] -> [T, H, N]: head h reads group h // (H // G), as repeat_interleave does."""
    T, G, N = t.shape
    return t[:, :, None, :].expand(T, G, heads // G, N).reshape(T, heads, N)


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
    """Same arguments and results as `kernels.reference.mamba_chunk_scan` (chunk_size is unused:
    fla picks its own). Returns (y [T, H, P] in x's dtype, final_state [H, P, N] float32)."""
    h0 = None if initial_state is None else initial_state[None]
    y, final = _scan(x, dt, A, B, C, D, dt_bias, h0, dt_softplus, dt_limit, None)
    return y, final[0]


def mamba_chunk_scan_varlen(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    seq_starts,
    chunk_size: int,
    D: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    dt_softplus: bool = True,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same arguments and results as `kernels.reference.mamba_chunk_scan_varlen`: every sequence in
    ONE fla call (`cu_seqlens`), instead of one call per sequence (a prefill chunk of 8 prompts
    through 23 Mamba layers was 184 calls, each ~0.4 ms of host time)."""
    starts = [int(s) - int(seq_starts[0]) for s in seq_starts]
    cu = (int_tensor(starts, x.device), torch.tensor(starts, dtype=torch.long))
    return _scan(x, dt, A, B, C, D, dt_bias, initial_states, dt_softplus, dt_limit, cu)


def _scan(x, dt, A, B, C, D, dt_bias, h0, dt_softplus, dt_limit, cu):
    """h0 [N, H, P, N] or None; cu (cu_seqlens on the device, on the host) or None (one sequence)."""
    T, H, P = x.shape
    dt = mamba_dt(dt, dt_bias, dt_softplus, dt_limit)  # [T, H] float32
    # fla's kernels want q, k, v in one dtype; x's dtype is the model's compute dtype. `out=`
    # computes in float32 and rounds once, in one pass (no float32 copy of x).
    v = torch.mul(x, dt[..., None], out=torch.empty_like(x))
    q = _per_head(C.to(x.dtype), H)
    k = _per_head(B.to(x.dtype), H)
    g = dt * A.float()[None, :]
    h0 = None if h0 is None else h0.float()
    varlen = {} if cu is None else {"cu_seqlens": cu[0], "cu_seqlens_cpu": cu[1]}
    o, final = chunk_simple_gla(
        q[None], k[None], v[None], g=g[None], scale=1.0, initial_state=h0,
        output_final_state=True, state_v_first=True, chunk_size=FLA_CHUNK, **varlen,
    )
    y = o[0].to(x.dtype)
    if D is not None:  # y + D x, in float32, rounded once
        y = torch.addcmul(y, x, D.float()[:, None], out=torch.empty_like(y))
    return y, final
