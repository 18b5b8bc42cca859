"""Gated (GLU) routed experts with biases, as SwiGLU MoEs (Qwen3-MoE) and gpt-oss run them.

Each assignment (token t, slot j, expert e = ids[t, j]) computes
    g = x[t] @ gate[e]^T + gate_bias[e],  u = x[t] @ up[e]^T + up_bias[e]
    h = act(g, u),  y = h @ down[e]^T + down_bias[e]
and the token's output is sum_j weights[t, j] * y. `act`:
- "silu": silu(g) * u (SwiGLU);
- "swiglu_clamped" (gpt-oss): g = min(g, limit), u = clamp(u, -limit, limit), (u + 1) * g * sigmoid(alpha * g).
gate and up are [E, I, H] and down [E, H, I] in any strides: gpt-oss's interleaved gate_up [E, H, 2I]
(x @ W layout) is passed as its views gate_up[..., ::2].transpose(1, 2) and gate_up[..., 1::2].transpose(1, 2),
so no copy of the weights is made. Computed in x's dtype, as transformers does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

GATED_ACTS = ("silu", "swiglu_clamped")


def gated_activation(act: str, g: torch.Tensor, u: torch.Tensor, alpha: float = 1.702,
                     limit: float | None = None) -> torch.Tensor:
    if act == "silu":
        return F.silu(g) * u
    if act == "swiglu_clamped":
        if limit is not None:
            g, u = g.clamp(max=limit), u.clamp(-limit, limit)
        return (u + 1) * g * torch.sigmoid(g * alpha)
    raise ValueError(f"unsupported gated expert activation {act!r}; supported: {', '.join(GATED_ACTS)}")


def _expert(x, e, gate, up, down, gate_bias, up_bias, down_bias, act, alpha, limit):
    g = x @ gate[e].transpose(0, 1)
    u = x @ up[e].transpose(0, 1)
    if gate_bias is not None:
        g = g + gate_bias[e]
    if up_bias is not None:
        u = u + up_bias[e]
    y = gated_activation(act, g, u, alpha, limit) @ down[e].transpose(0, 1)
    return y + down_bias[e] if down_bias is not None else y


def moe_gated_experts(x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor, gate: torch.Tensor,
                      up: torch.Tensor, down: torch.Tensor, act: str = "silu", gate_bias: torch.Tensor | None = None,
                      up_bias: torch.Tensor | None = None, down_bias: torch.Tensor | None = None,
                      alpha: float = 1.702, limit: float | None = None) -> torch.Tensor:
    """x [T, H]; weights/ids [T, k]; gate/up [E, I, H], down [E, H, I]; biases [E, I], [E, I], [E, H] or
    None. Returns [T, H] in x's dtype. Tokens are sorted by expert and each expert hit runs once on its
    rows (the counts are read on the host: free on the CPU); while a device graph is being captured,
    where no host read can run, every expert runs on every token and the chosen results are kept."""
    k = ids.shape[1]
    E = gate.shape[0]
    capturing = x.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
    parts = (gate, up, down, gate_bias, up_bias, down_bias, act, alpha, limit)
    if capturing:
        return every_expert(x, weights, ids, *parts)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    token = order // k
    counts = torch.bincount(flat, minlength=E).tolist()
    rows = x[token]
    out = torch.empty(rows.shape[0], x.shape[1], dtype=x.dtype, device=x.device)
    start = 0
    for e, n in enumerate(counts):
        if n:
            out[start:start + n] = _expert(rows[start:start + n], e, *parts)
            start += n
    out = out * weights.reshape(-1)[order, None].to(out.dtype)
    return torch.zeros_like(x).index_add_(0, token, out)


def moe_gated_experts_unsummed(x, weights, ids, gate, up, down, act="silu", gate_bias=None, up_bias=None,
                               down_bias=None, alpha=1.702, limit=None) -> torch.Tensor:
    """[T, k, H] in x's dtype: each assignment's weighted expert output, the sum over k left to the
    caller (the reference of the fused gated MoE's unsummed form, which dispatch hands out beside it)."""
    T, k = ids.shape
    out = torch.empty(T, k, x.shape[1], dtype=x.dtype, device=x.device)
    parts = (gate, up, down, gate_bias, up_bias, down_bias, act, alpha, limit)
    for e in ids.unique().tolist():
        t, j = (ids == e).nonzero(as_tuple=True)
        out[t, j] = _expert(x[t], e, *parts)
    return (out.float() * weights[..., None].float()).to(x.dtype)


def every_expert(x, weights, ids, gate, up, down, gate_bias, up_bias, down_bias, act, alpha, limit):
    """The graph-safe form: every expert on every token, each token keeping its chosen experts' results
    (summed in float32)."""
    out = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32, device=x.device)
    for e in range(gate.shape[0]):
        w = (weights.float() * (ids == e)).sum(-1, keepdim=True)
        out += _expert(x, e, gate, up, down, gate_bias, up_bias, down_bias, act, alpha, limit).float() * w
    return out.to(x.dtype)


def router_topk_softmax(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                        top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """gpt-oss's router: logits = hidden @ weight^T + bias in float32 (weight [E, H]), the top k of the
    raw logits, softmax over those k. Returns (weights [T, k] float32, ids [T, k] int64)."""
    logits = F.linear(hidden.float(), weight.float(), None if bias is None else bias.float())
    top, ids = torch.topk(logits, top_k, dim=-1)
    return torch.softmax(top, dim=-1), ids
