"""The Mamba2 chunked scan through flash-linear-attention's `chunk_simple_gla`.

Mamba2's SSD is gated linear attention with one scalar decay per head and token:
    S_t = exp(g_t) S_{t-1} + v_t k_t^T,  o_t = scale * S_t q_t
with q = C, k = B, v = dt * x, g = dt * A (a natural-log decay; fla turns it into exp2 inside) and
scale = 1. fla wants [batch, T, H, ...] (sequence-first), one q/k per head (so B and C are
broadcast from their groups to the heads) and, with `state_v_first=True`, a state laid out
[H, V, K] = [H, P, N], which is our SSM state's layout. Its final state is float32.
"""

from __future__ import annotations

from functools import lru_cache

import torch
import triton
from fla.ops.simple_gla import chunk_simple_gla

from ..reference.mamba_dt import mamba_dt
from ..reference.varlen import int_tensor

# fla's own tuned chunk length; the chunking is only a way of computing and changes no result.
FLA_CHUNK = 64
# The varlen scan through fla's kernels without its per-call host read (tests compare both ways).
USE_SYNC_FREE = True


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
    starts = tuple(int(s) - int(seq_starts[0]) for s in seq_starts)
    cu = (int_tensor(starts, x.device), _host_tensor(starts), starts)
    return _scan(x, dt, A, B, C, D, dt_bias, initial_states, dt_softplus, dt_limit, cu)


@lru_cache(maxsize=64)
def _host_tensor(values: tuple[int, ...]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


def _gla_varlen(q, k, v, g, h0, cu):
    """`chunk_simple_gla`'s forward over cu_seqlens (scale 1, state [V, K], final states kept),
    through fla's own kernels but without the host read of the chunk count that its `chunk_fwd_h`
    makes on every call (a device sync per Mamba layer in every prefill step): the count comes from
    the host copy of the offsets. None when fla's internals are not where fla 0.6 keeps them (the
    caller then uses the public function)."""
    try:
        from fla.ops.common.chunk_h import chunk_fwd_kernel_h
        from fla.ops.common.chunk_o import chunk_fwd_o
        from fla.ops.utils import chunk_local_cumsum, prepare_chunk_indices
        from fla.ops.utils.constant import RCP_LN2
    except ImportError:
        return None
    cu_dev, cu_host, starts = cu
    BT = FLA_CHUNK
    q, k, v, g = q.contiguous(), k.contiguous(), v.contiguous(), g.contiguous()
    B, T, H, K = k.shape
    V, N = v.shape[-1], len(starts) - 1
    offsets = [0]
    for lo, hi in zip(starts[:-1], starts[1:]):
        offsets.append(offsets[-1] + -(-(hi - lo) // BT))
    chunk_indices = prepare_chunk_indices(cu_dev, BT, cu_seqlens_cpu=cu_host)
    g = chunk_local_cumsum(g, chunk_size=BT, scale=RCP_LN2, cu_seqlens=cu_dev, chunk_indices=chunk_indices)
    h = k.new_empty(B, offsets[-1], H, V, K)
    ht = k.new_empty(N, H, V, K, dtype=torch.float)
    grid = lambda meta: (triton.cdiv(K, meta["BK"]) * triton.cdiv(V, meta["BV"]) * N * H,)  # noqa: E731
    chunk_fwd_kernel_h[grid](k=k, v=v, h=h, g=g, g_gamma=None, gk=None, gv=None,
                             h0=None if h0 is None else h0.contiguous(), ht=ht, cu_seqlens=cu_dev,
                             split_offsets=int_tensor(offsets, k.device), T=T, H=H, K=K, V=V, BT=BT, BS=BT,
                             USE_G=True, USE_G_GAMMA=False, USE_GK=False, USE_GV=False, STATE_V_FIRST=True)
    o = chunk_fwd_o(q=q, k=k, v=v, g=g, g_gamma=None, h=h, scale=1.0, state_v_first=True, cu_seqlens=cu_dev,
                    chunk_size=BT, chunk_indices=chunk_indices)
    return o.to(q.dtype), ht


def _scan(x, dt, A, B, C, D, dt_bias, h0, dt_softplus, dt_limit, cu):
    """h0 [N, H, P, N] or None; cu (cu_seqlens on the device, on the host, as ints) or None (one sequence)."""
    T, H, P = x.shape
    dt = mamba_dt(dt, dt_bias, dt_softplus, dt_limit)  # [T, H] float32
    # fla's kernels want q, k, v in one dtype; x's dtype is the model's compute dtype. `out=`
    # computes in float32 and rounds once, in one pass (no float32 copy of x).
    v = torch.mul(x, dt[..., None], out=torch.empty_like(x))
    q = _per_head(C.to(x.dtype), H)
    k = _per_head(B.to(x.dtype), H)
    g = dt * A.float()[None, :]
    h0 = None if h0 is None else h0.float()
    done = _gla_varlen(q[None], k[None], v[None], g[None], h0, cu) if cu is not None and USE_SYNC_FREE else None
    if done is not None:
        o, final = done
    else:
        varlen = {} if cu is None else {"cu_seqlens": cu[0], "cu_seqlens_cpu": cu[1]}
        o, final = chunk_simple_gla(
            q[None], k[None], v[None], g=g[None], scale=1.0, initial_state=h0,
            output_final_state=True, state_v_first=True, chunk_size=FLA_CHUNK, **varlen,
        )
    y = o[0].to(x.dtype)
    if D is not None:  # y + D x, in float32, rounded once
        y = torch.addcmul(y, x, D.float()[:, None], out=torch.empty_like(y))
    return y, final
