"""A MoE layer's routed experts on the CPU, in one of three forms picked by the batch's width.

"each" (one or two tokens, float32): each token's k experts one after another, each result added
with its routing weight as it comes: no sort, no gather, no scatter (a lone request's decode step,
the tail of every batch of requests; about 10 calls a layer fewer than "sorted" for one token).

"sorted" (kernels/reference/moe_experts.py's form of that name): each expert once on its block of
assignments, products through linear.py. Its Python is per expert: two products and an activation
each, about 35 torch calls a layer once most experts are hit; the experts' weight views are made
once per weight tensor, not per step.

"dense", from DENSE_MIN_ASSIGNMENTS_PER_EXPERT assignments per expert: every expert on every token
in two batched products (bmm over the experts, each expert's weight read where it lies in the
engine's [in, out] layout, core/engine/cpu_linears.py), the routing weight (0 for an expert the
token did not pick) applied between them, which the linear down projection allows:
    out_t = sum_e w_te * down_e(act(up_e x_t)) = sum_e down_e(w_te * act(up_e x_t)).
A decode batch of 8 tokens of top-2 over 8 experts hits 7 of them on average, so reading them all
costs little, and the layer takes about 10 calls. A batch that hits few experts would read the
others for nothing; a prompt's many rows would multiply the arithmetic by E / k: both keep the
sorted form.
"""

from __future__ import annotations

import torch

from ..reference.mlp import activation
from .mlp import mlp, per_expert

# Measured on this project's 2-core AMD EPYC by bench/cpu_moe_forms.py (one thread, the NemotronH
# miniature's MoE shape: 8 experts of 128, top-2, H 256, weights cold in cache), us per layer:
# 1 token: each 121, sorted 327, dense 362; 2 tokens: each 253, sorted 275, dense 418; then sorted
# vs dense: 4 tokens 632 vs 533, 8 tokens 749 vs 587, 16 tokens 892 vs 693, 32 tokens 892 vs 908.
# So each up to 2 tokens, dense from one assignment per expert up to 32 tokens, sorted beyond.
FORMS = ("each", "dense", "sorted")
EACH_MAX_TOKENS = 2
DENSE_MIN_ASSIGNMENTS_PER_EXPERT = 1.0
DENSE_MAX_TOKENS = 32


def moe_form(num_tokens: int, top_k: int, num_experts: int, dtype: torch.dtype) -> str:
    """"each", "dense" or "sorted" for a batch of this shape ("each" and "dense" in float32 only,
    where the order of the weighted sum changes nothing but the rounding of a float32 sum)."""
    if 0 < num_tokens <= EACH_MAX_TOKENS and dtype == torch.float32:
        return "each"
    dense = (dtype == torch.float32 and 0 < num_tokens <= DENSE_MAX_TOKENS
             and num_tokens * top_k >= DENSE_MIN_ASSIGNMENTS_PER_EXPERT * num_experts)
    return "dense" if dense else "sorted"


def moe_experts(x, weights, ids, up, down, gate=None, act="relu2", strategy=None):
    """As the reference: x [T, H]; weights/ids [T, k]; up/gate [E, I, H], down [E, H, I]; returns
    [T, H]. `strategy` "each", "dense" or "sorted" forces a form (tests); otherwise `moe_form`
    picks it."""
    T, k = ids.shape
    if T * k == 0:
        return x.new_zeros(T, down.shape[1])
    form = strategy if strategy in FORMS else moe_form(T, k, up.shape[0], x.dtype)
    if form == "each":
        return _each(x, weights, ids, up, down, gate, act)
    if form == "dense":
        return _dense(x, weights, ids, up, down, gate, act)
    return _sorted(x, weights, ids, up, down, gate, act)


def _each(x, weights, ids, up, down, gate, act):
    ups, downs = per_expert(up), per_expert(down)
    gates = per_expert(gate) if gate is not None else None
    rows = []
    for t, (experts, ws) in enumerate(zip(ids.tolist(), weights.float().tolist())):
        xt, out = x[t:t + 1], None
        for e, w in zip(experts, ws):
            y = mlp(xt, ups[e], downs[e], None if gates is None else gates[e], act)
            out = y.mul_(w) if out is None else out.add_(y, alpha=w)
        rows.append(out)
    return (rows[0] if len(rows) == 1 else torch.cat(rows)).to(x.dtype)


def _dense(x, weights, ids, up, down, gate, act):
    T, E = x.shape[0], up.shape[0]
    h = torch.matmul(x, up.transpose(1, 2))  # [E, T, I]
    h = activation(act, torch.matmul(x, gate.transpose(1, 2))) * h if gate is not None else activation(act, h)
    routing = x.new_zeros(T, E).scatter_add_(1, ids, weights.to(x.dtype))  # [T, E]; an expert picked twice counts twice
    h.mul_(routing.t()[:, :, None])
    return torch.bmm(h, down.transpose(1, 2)).sum(0)  # [E, T, H] summed over the experts


def _sorted(x, weights, ids, up, down, gate, act):
    T, k = ids.shape
    flat = ids.reshape(-1)
    order = flat.argsort(stable=True)
    counts = torch.bincount(flat, minlength=up.shape[0]).tolist()
    blocks = x.index_select(0, order // k).split(counts)  # one block of rows per expert, in expert order
    ups, downs = per_expert(up), per_expert(down)
    gates = per_expert(gate) if gate is not None else (None,) * len(counts)
    out_sorted = torch.cat([mlp(rows, ups[e], downs[e], gates[e], act) for e, rows in enumerate(blocks) if counts[e]])
    per_assignment = torch.empty_like(out_sorted).index_copy_(0, order, out_sorted)
    return (per_assignment.view(T, k, -1).float() * weights[..., None].float()).sum(1).to(x.dtype)
