"""Kimi Delta Attention (KDA, Kimi-Linear): the gated delta rule with a decay per key channel.

Per value head h and token t, with a state S [dk, dv] (float32) and g_t [dk] (log decay, <= 0):
    S <- diag(exp(g_t)) S                 (each key channel forgets at its own rate)
    u_t = beta_t (v_t - S^T k_t)
    S <- S + k_t u_t^T
    o_t = S^T q_t
q and k are L2-normalised first (when asked) and q scaled by dk^-0.5 (or `scale`). As in the gated
delta rule (gated_delta_rule.py, where g_t is one number per head), several value heads may share
one q/k head; g and beta are per value head.

`recurrent`: token by token (decode). `chunked`: a chunk at a time (prefill); with G_t the
cumulative log decay [dk] up to t inside the chunk, the pair weights carry e^{G_t - G_j} per key
channel (computed pairwise, never as e^{G_t} e^{-G_j}, which overflows for fast-decaying channels).
flash-linear-attention's `chunk_kda` / `fused_recurrent_kda` compute the same (kernels/fla/kda.py),
tested against these.
"""

from __future__ import annotations

from typing import Sequence

import torch

CHUNK = 32  # the pairwise weights are [H, C, C, dk]: 32 keeps them a few MiB at dk 128


def _prepare(q, k, v, g, beta, scale, qk_l2norm):
    """-> float32 [H, T, ...] tensors with q/k broadcast to the value heads, q normalised and scaled."""
    Hk, Hv = q.shape[1], v.shape[1]
    if Hv % Hk:
        raise ValueError(f"KDA: {Hv} value heads are not a multiple of {Hk} key heads")
    if g.shape[-1] != q.shape[-1]:
        raise ValueError(f"KDA: the decay has {g.shape[-1]} channels per head, the keys {q.shape[-1]}")
    q, k = (x.float().repeat_interleave(Hv // Hk, dim=1) for x in (q, k))
    if qk_l2norm:
        q, k = (x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6) for x in (q, k))
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)
    return tuple(x.float().transpose(0, 1) for x in (q, k, v, g, beta))


def _initial(state, Hv, dk, dv, device):
    return torch.zeros(Hv, dk, dv, device=device) if state is None else state.float().clone()


def kda_recurrent(q, k, v, g, beta, initial_state=None, scale=None, qk_l2norm=True):
    """One sequence, token by token. q/k [T, Hk, dk], v [T, Hv, dv], g [T, Hv, dk], beta [T, Hv],
    state [Hv, dk, dv]. Returns (o [T, Hv, dv] in v's dtype, final state [Hv, dk, dv] float32)."""
    T, Hv, dv = v.shape
    qh, kh, vh, gh, bh = _prepare(q, k, v, g, beta, scale, qk_l2norm)
    S = _initial(initial_state, Hv, qh.shape[-1], dv, v.device)
    out = torch.empty(Hv, T, dv, device=v.device)
    for t in range(T):
        S = S * gh[:, t].exp()[:, :, None]
        u = bh[:, t, None] * (vh[:, t] - torch.einsum("hk,hkv->hv", kh[:, t], S))
        S = S + kh[:, t, :, None] * u[:, None, :]
        out[:, t] = torch.einsum("hk,hkv->hv", qh[:, t], S)
    return out.transpose(0, 1).to(v.dtype), S


def kda_chunked(q, k, v, g, beta, initial_state=None, scale=None, qk_l2norm=True, chunk_size=CHUNK):
    """One sequence, a chunk at a time; same arguments and results as `kda_recurrent`.

    In a chunk starting from state S0, with G_t [dk] the cumulative log decay up to t (inclusive)
    and A_tj = sum_c k_tc k_jc e^{G_tc - G_jc} (j < t), B_tj = sum_c q_tc k_jc e^{G_tc - G_jc} (j <= t):
        u_t + beta_t sum_{j<t} A_tj u_j = beta_t (v_t - (e^{G_t} * k_t)^T S0)
        o_t = (e^{G_t} * q_t)^T S0 + sum_{j<=t} B_tj u_j
        S_end = diag(e^{G_last}) S0 + sum_j (e^{G_last - G_j} * k_j) u_j^T
    """
    T, Hv, dv = v.shape
    qh, kh, vh, gh, bh = _prepare(q, k, v, g, beta, scale, qk_l2norm)
    S = _initial(initial_state, Hv, qh.shape[-1], dv, v.device)
    out = torch.empty(Hv, T, dv, device=v.device)
    for s in range(0, T, chunk_size):
        e = min(s + chunk_size, T)
        n = e - s
        qc, kc, vc, bc = qh[:, s:e], kh[:, s:e], vh[:, s:e], bh[:, s:e]
        G = gh[:, s:e].cumsum(1)  # [H, C, dk]
        causal = torch.ones(n, n, dtype=torch.bool, device=v.device).tril()
        diff = G[:, :, None, :] - G[:, None, :, :]  # [H, t, j, dk]: G_t - G_j
        decay = torch.where(causal[None, :, :, None], diff, float("-inf")).exp()  # zero above the diagonal
        A = torch.einsum("htc,hjc,htjc->htj", kc, kc, decay) * (~torch.eye(n, dtype=torch.bool, device=v.device))
        Bq = torch.einsum("htc,hjc,htjc->htj", qc, kc, decay)
        system = torch.eye(n, device=v.device) + bc[:, :, None] * A
        rhs = bc[:, :, None] * (vc - (G.exp() * kc) @ S)
        u = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)  # [H, C, dv]
        out[:, s:e] = (G.exp() * qc) @ S + Bq @ u
        last = G[:, -1:]  # [H, 1, dk]
        S = last.exp().transpose(1, 2) * S + ((last - G).exp() * kc).transpose(1, 2) @ u
    return out.transpose(0, 1).to(v.dtype), S


def kda_chunk(q, k, v, g, beta, seq_starts: Sequence[int], initial_states=None, scale=None, qk_l2norm=True):
    """Several sequences back to back (prefill and prompt chunks): q/k [T, Hk, dk], v [T, Hv, dv],
    g [T, Hv, dk], beta [T, Hv], seq_starts (B + 1 offsets), initial_states [B, Hv, dk, dv] or None.
    Returns (o [T, Hv, dv], final states [B, Hv, dk, dv] float32)."""
    T, Hv, dv = v.shape
    n = len(seq_starts) - 1
    out = torch.empty_like(v)
    finals = torch.empty(n, Hv, q.shape[-1], dv, device=v.device)
    for i, (s, e) in enumerate(zip(seq_starts[:-1], seq_starts[1:])):
        init = None if initial_states is None else initial_states[i]
        out[s:e], finals[i] = kda_chunked(q[s:e], k[s:e], v[s:e], g[s:e], beta[s:e], init, scale, qk_l2norm)
    return out, finals


def kda_recurrent_inplace(q, k, v, g, beta, states, slots, scale=None, qk_l2norm=True):
    """One decode token for each of B requests on a state pool: q/k [B, Hk, dk], v [B, Hv, dv],
    g [B, Hv, dk], beta [B, Hv], states [num_slots, Hv, dk, dv] (updated in place at `slots` [B]).
    Returns o [B, Hv, dv]."""
    qh, kh, vh, gh, bh = (x.transpose(0, 1) for x in _prepare(q, k, v, g, beta, scale, qk_l2norm))  # [B, H, ...]
    S = states[slots].float() * gh.exp()[..., None]  # [B, H, dk, dv]
    u = bh[..., None] * (vh - torch.einsum("bhk,bhkv->bhv", kh, S))
    S = S + kh[..., :, None] * u[..., None, :]
    states[slots] = S.to(states.dtype)
    return torch.einsum("bhk,bhkv->bhv", qh, S).to(v.dtype)
