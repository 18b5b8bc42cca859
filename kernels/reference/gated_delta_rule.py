"""The gated delta rule (gated DeltaNet: Qwen3-Next, Qwen3.5), in its two forms.

Per value head h and token t, with a state S [dk, dv] (float32):
    S <- exp(g_t) S                       (scalar decay per head and token, g <= 0)
    u_t = beta_t (v_t - S^T k_t)          (the delta: what the state mispredicts for k_t)
    S <- S + k_t u_t^T
    o_t = S^T q_t
q and k are L2-normalised first (when asked) and q scaled by dk^-0.5 (or `scale`). Several value
heads may share one q/k head (grouped value attention): head h reads q/k head h // (Hv // Hk).

`recurrent`: token by token, as written above (decode). `chunked`: the same numbers computed a
chunk at a time (prefill): inside a chunk the deltas solve one unit-lower-triangular system, the
chunk's outputs read the entering state once, and the state is carried from chunk to chunk.
flash-linear-attention's `chunk_gated_delta_rule` / `fused_recurrent_gated_delta_rule` compute the
same (kernels/fla/gated_delta_rule.py), tested against these.
"""

from __future__ import annotations

from typing import Sequence

import torch

CHUNK = 64


def _prepare(q, k, v, g, beta, scale, qk_l2norm):
    """-> float32 [H, T, d] tensors with q/k broadcast to the value heads, q normalised and scaled."""
    Hk, Hv = q.shape[1], v.shape[1]
    if Hv % Hk:
        raise ValueError(f"gated delta rule: {Hv} value heads are not a multiple of {Hk} key heads")
    q, k = (x.float().repeat_interleave(Hv // Hk, dim=1) for x in (q, k))
    if qk_l2norm:
        q, k = (x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6) for x in (q, k))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    q = q * scale
    heads_first = [x.transpose(0, 1) for x in (q, k, v.float())]  # [H, T, d]
    return (*heads_first, g.float().transpose(0, 1), beta.float().transpose(0, 1))


def _initial(state, Hv, dk, dv, device):
    return torch.zeros(Hv, dk, dv, device=device) if state is None else state.float().clone()


def gated_delta_rule_recurrent(q, k, v, g, beta, initial_state=None, scale=None, qk_l2norm=True):
    """One sequence, token by token. q/k [T, Hk, dk], v [T, Hv, dv], g/beta [T, Hv], state [Hv, dk, dv].
    Returns (o [T, Hv, dv] in v's dtype, final state [Hv, dk, dv] float32)."""
    T, Hv, dv = v.shape
    qh, kh, vh, gh, bh = _prepare(q, k, v, g, beta, scale, qk_l2norm)
    S = _initial(initial_state, Hv, qh.shape[-1], dv, v.device)
    out = torch.empty(Hv, T, dv, device=v.device)
    for t in range(T):
        S = S * gh[:, t].exp()[:, None, None]
        u = bh[:, t, None] * (vh[:, t] - torch.einsum("hk,hkv->hv", kh[:, t], S))
        S = S + kh[:, t, :, None] * u[:, None, :]
        out[:, t] = torch.einsum("hk,hkv->hv", qh[:, t], S)
    return out.transpose(0, 1).to(v.dtype), S


def gated_delta_rule_chunked(q, k, v, g, beta, initial_state=None, scale=None, qk_l2norm=True, chunk_size=CHUNK):
    """One sequence, a chunk at a time; same arguments and results as `gated_delta_rule_recurrent`.

    In a chunk starting from state S0, with G_t the cumulative log decay up to t (inclusive):
        u_t + sum_{j<t} beta_t e^{G_t - G_j} (k_t . k_j) u_j = beta_t (v_t - e^{G_t} S0^T k_t)
        o_t = e^{G_t} S0^T q_t + sum_{j<=t} e^{G_t - G_j} (q_t . k_j) u_j
        S_end = e^{G_last} S0 + sum_j e^{G_last - G_j} k_j u_j^T
    """
    T, Hv, dv = v.shape
    qh, kh, vh, gh, bh = _prepare(q, k, v, g, beta, scale, qk_l2norm)
    S = _initial(initial_state, Hv, qh.shape[-1], dv, v.device)
    out = torch.empty(Hv, T, dv, device=v.device)
    for s in range(0, T, chunk_size):
        e = min(s + chunk_size, T)
        qc, kc, vc, bc = qh[:, s:e], kh[:, s:e], vh[:, s:e], bh[:, s:e]
        G = gh[:, s:e].cumsum(-1)  # [H, C]
        n = e - s
        diff = G[:, :, None] - G[:, None, :]  # G_t - G_j
        causal = torch.ones(n, n, dtype=torch.bool, device=v.device).tril()
        decay = torch.where(causal, diff, float("-inf")).exp()  # zero above the diagonal
        strict = decay * (~torch.eye(n, dtype=torch.bool, device=v.device))
        system = torch.eye(n, device=v.device) + bc[:, :, None] * strict * (kc @ kc.transpose(1, 2))
        rhs = bc[:, :, None] * (vc - G.exp()[:, :, None] * (kc @ S))
        u = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)  # [H, C, dv]
        out[:, s:e] = G.exp()[:, :, None] * (qc @ S) + (decay * (qc @ kc.transpose(1, 2))) @ u
        last = G[:, -1:]  # [H, 1]
        S = last.exp()[:, :, None] * S + (kc * (last - G).exp()[:, :, None]).transpose(1, 2) @ u
    return out.transpose(0, 1).to(v.dtype), S


def gated_delta_rule_chunk(q, k, v, g, beta, seq_starts: Sequence[int], initial_states=None, scale=None,
                           qk_l2norm=True):
    """Several sequences back to back (prefill and prompt chunks): q/k [T, Hk, dk], v [T, Hv, dv],
    g/beta [T, Hv], seq_starts (B + 1 offsets), initial_states [B, Hv, dk, dv] or None (zeros).
    Returns (o [T, Hv, dv], final states [B, Hv, dk, dv] float32)."""
    T, Hv, dv = v.shape
    n = len(seq_starts) - 1
    out = torch.empty_like(v)
    finals = torch.empty(n, Hv, q.shape[-1], dv, device=v.device)
    for i, (s, e) in enumerate(zip(seq_starts[:-1], seq_starts[1:])):
        init = None if initial_states is None else initial_states[i]
        out[s:e], finals[i] = gated_delta_rule_chunked(q[s:e], k[s:e], v[s:e], g[s:e], beta[s:e], init, scale,
                                                       qk_l2norm)
    return out, finals


def gated_delta_rule_recurrent_inplace(q, k, v, g, beta, states, slots, scale=None, qk_l2norm=True):
    """One decode token for each of B requests on a state pool: q/k [B, Hk, dk], v [B, Hv, dv],
    g/beta [B, Hv], states [num_slots, Hv, dk, dv] (updated in place at `slots` [B]).
    Returns o [B, Hv, dv]. All B requests step together (a batch of one-token sequences)."""
    B, Hv, dv = v.shape
    # [B, H, d] read as one token of B "heads groups": _prepare works per token row.
    qh, kh, vh, gh, bh = _prepare(q, k, v, g, beta, scale, qk_l2norm)  # [H, B, ...]
    S = states[slots].float()  # [B, H, dk, dv]
    S = S * gh.transpose(0, 1).exp()[:, :, None, None]
    kb, qb, vb, bb = kh.transpose(0, 1), qh.transpose(0, 1), vh.transpose(0, 1), bh.transpose(0, 1)
    u = bb[..., None] * (vb - torch.einsum("bhk,bhkv->bhv", kb, S))
    S = S + kb[..., :, None] * u[..., None, :]
    states[slots] = S.to(states.dtype)
    return torch.einsum("bhk,bhkv->bhv", qb, S).to(v.dtype)
