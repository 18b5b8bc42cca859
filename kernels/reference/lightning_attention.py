"""Lightning attention (MiniMax-M1 / Text-01): linear attention with a fixed decay per head.

Per head h with slope s_h > 0 and a state S [dk, dv] (float32):
    S <- exp(-s_h) S + k_t v_t^T,   o_t = S^T q_t
(no softmax, no normalisation, no scale). `recurrent`: token by token (decode). `chunked`: a chunk
at a time (prefill), in closed form: with S0 the entering state and n the chunk length,
    o_t = e^{-s(t+1)} S0^T q_t + sum_{j<=t} e^{-s(t-j)} (q_t . k_j) v_j
    S_end = e^{-s n} S0 + sum_j e^{-s(n-1-j)} k_j v_j^T
"""

from __future__ import annotations

from typing import Sequence

import torch

CHUNK = 64


def lightning_recurrent(q, k, v, slopes, initial_state=None):
    """One sequence: q/k [T, H, dk], v [T, H, dv], slopes [H], state [H, dk, dv].
    Returns (o [T, H, dv] in v's dtype, final state float32)."""
    T, H, dv = v.shape
    S = torch.zeros(H, q.shape[-1], dv, device=v.device) if initial_state is None else initial_state.float().clone()
    decay = torch.exp(-slopes.float())[:, None, None]
    out = torch.empty(T, H, dv, device=v.device)
    qf, kf, vf = q.float(), k.float(), v.float()
    for t in range(T):
        S = decay * S + kf[t, :, :, None] * vf[t, :, None, :]
        out[t] = torch.einsum("hk,hkv->hv", qf[t], S)
    return out.to(v.dtype), S


def lightning_chunked(q, k, v, slopes, initial_state=None, chunk_size=CHUNK):
    """Same arguments and results as `lightning_recurrent`, a chunk at a time."""
    T, H, dv = v.shape
    S = torch.zeros(H, q.shape[-1], dv, device=v.device) if initial_state is None else initial_state.float().clone()
    s = slopes.float()[:, None]  # [H, 1]
    qh, kh, vh = (x.float().transpose(0, 1) for x in (q, k, v))  # [H, T, d]
    out = torch.empty(H, T, dv, device=v.device)
    for a in range(0, T, chunk_size):
        e = min(a + chunk_size, T)
        n = e - a
        pos = torch.arange(n, device=v.device, dtype=torch.float32)
        gap = pos[:, None] - pos[None, :]  # t - j
        intra = torch.where(gap >= 0, torch.exp(-s[:, :, None] * gap.clamp(min=0)), 0.0)  # [H, n, n]
        qc, kc, vc = qh[:, a:e], kh[:, a:e], vh[:, a:e]
        out[:, a:e] = torch.exp(-s * (pos + 1))[:, :, None] * (qc @ S) + (intra * (qc @ kc.transpose(1, 2))) @ vc
        S = torch.exp(-s * n)[:, :, None] * S + (kc * torch.exp(-s * (n - 1 - pos))[:, :, None]).transpose(1, 2) @ vc
    return out.transpose(0, 1).to(v.dtype), S


def lightning_attention_chunk(q, k, v, slopes, seq_starts: Sequence[int], initial_states=None):
    """Several sequences back to back: q/k [T, H, dk], v [T, H, dv], seq_starts (B + 1 offsets),
    initial_states [B, H, dk, dv] or None. Returns (o [T, H, dv], final states [B, H, dk, dv] float32)."""
    T, H, dv = v.shape
    n = len(seq_starts) - 1
    out = torch.empty_like(v)
    finals = torch.empty(n, H, q.shape[-1], dv, device=v.device)
    for i, (a, e) in enumerate(zip(seq_starts[:-1], seq_starts[1:])):
        init = None if initial_states is None else initial_states[i]
        out[a:e], finals[i] = lightning_chunked(q[a:e], k[a:e], v[a:e], slopes, init)
    return out, finals


def lightning_attention_recurrent_inplace(q, k, v, slopes, states, slots):
    """One decode token for each of B requests: q/k [B, H, dk], v [B, H, dv], states [num_slots,
    H, dk, dv] updated in place at `slots` [B]. Returns o [B, H, dv]."""
    S = states[slots].float()
    S = torch.exp(-slopes.float())[None, :, None, None] * S + k.float()[..., :, None] * v.float()[..., None, :]
    states[slots] = S.to(states.dtype)
    return torch.einsum("bhk,bhkv->bhv", q.float(), S).to(v.dtype)
