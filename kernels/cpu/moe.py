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
sorted form. Where the expert stacks are parameters, "dense" is two plain products over packed
copies (onednn_packed.py): the experts' up rows stacked [E*I, H], their down columns side by side
[H, E*I], so the sum over the experts is the down product's own sum; `moe_experts_shared` appends
the shared expert's rows and columns at routing weight 1, and the whole layer is those two
products (258 against 424 us at 8 tokens, shared expert included).
"""

from __future__ import annotations

import torch

from ..reference.mlp import activation
from . import onednn_packed
from .mlp import mlp, per_expert
from .opaque import opaque

# Measured on this project's 2-core AMD EPYC by bench/cpu_moe_forms.py (one thread, the NemotronH
# miniature's MoE shape: 8 experts of 128, top-2, H 256, weights cold in cache), us per layer:
# 1 token: each 121, sorted 327, dense 362; 2 tokens: each 253, sorted 275, dense 418; then sorted
# vs dense: 4 tokens 632 vs 533, 8 tokens 749 vs 587, 16 tokens 892 vs 693, 32 tokens 892 vs 908.
# So each up to 2 tokens, dense from one assignment per expert up to 32 tokens, sorted beyond.
# With the shared expert appended to packed copies dense stays ahead longer (shared MLP + sorted vs
# dense: 32 tokens 993 vs 564, 48 tokens 1116 vs 803, 64 tokens 1232 vs 1030): up to 64 tokens
# then (`moe_experts_shared`), which takes in a short prompt riding with a decode batch, where dense
# does at most DENSE_PACKED_MAX_WORK times the arithmetic the assignments need (E / k; measured at
# 4: 8 experts, top-2). Routed experts alone keep 32 (at 48 tokens sorted 661 vs dense 906 us).
FORMS = ("each", "dense", "sorted")
EACH_MAX_TOKENS = 2
DENSE_MIN_ASSIGNMENTS_PER_EXPERT = 1.0
DENSE_MAX_TOKENS = 32
DENSE_MAX_TOKENS_PACKED = 64
DENSE_PACKED_MAX_WORK = 4


def moe_form(num_tokens: int, top_k: int, num_experts: int, dtype: torch.dtype, packed: bool = False) -> str:
    """"each", "dense" or "sorted" for a batch of this shape ("each" and "dense" in float32 only,
    where the order of the weighted sum changes nothing but the rounding of a float32 sum);
    `packed`: the dense form would run over packed copies with the shared expert appended."""
    if 0 < num_tokens <= EACH_MAX_TOKENS and dtype == torch.float32:
        return "each"
    longer = packed and num_experts <= DENSE_PACKED_MAX_WORK * top_k
    dense = (dtype == torch.float32 and 0 < num_tokens <= (DENSE_MAX_TOKENS_PACKED if longer else DENSE_MAX_TOKENS)
             and num_tokens * top_k >= DENSE_MIN_ASSIGNMENTS_PER_EXPERT * num_experts)
    return "dense" if dense else "sorted"


def _moe_out(x, weights, ids, up, down, *rest, **kwargs):
    """The [T, H] result's shape, for a compiled step (opaque.py)."""
    return x.new_empty(x.shape[0], down.shape[1])


@opaque("(Tensor x, Tensor weights, Tensor ids, Tensor up, Tensor down, Tensor? gate=None, str act='relu2', "
        "str? strategy=None) -> Tensor", _moe_out)
def moe_experts(x, weights, ids, up, down, gate=None, act="relu2", strategy=None):
    """As the reference: x [T, H]; weights/ids [T, k]; up/gate [E, I, H], down [E, H, I]; returns
    [T, H]. `strategy` "each", "dense" or "sorted" forces a form (tests); otherwise `moe_form`
    picks it."""
    T, k = ids.shape
    if T * k == 0:
        return x.new_zeros(T, down.shape[1])
    packed = onednn_packed.wanted(x, up, down, *((gate,) if gate is not None else ()))
    form = strategy if strategy in FORMS else moe_form(T, k, up.shape[0], x.dtype)
    if form == "each":
        return _each(x, weights, ids, up, down, gate, act)
    if form == "dense":
        return _dense(x, weights, ids, up, down, gate, act, packed)
    return _sorted(x, weights, ids, up, down, gate, act)


@opaque("(Tensor x, Tensor weights, Tensor ids, Tensor up, Tensor down, Tensor shared_up, Tensor shared_down, "
        "str act='relu2') -> Tensor", _moe_out)
def moe_experts_shared(x, weights, ids, up, down, shared_up, shared_down, act="relu2"):
    """[T, H]: a MoE layer's shared expert (shared_up [S, H], shared_down [H, S], same activation)
    plus its routed experts (arguments as `moe_experts`), added in that order as the model adds them."""
    T, k = ids.shape
    if T * k and onednn_packed.wanted(x, up, down, shared_up, shared_down) \
            and moe_form(T, k, up.shape[0], x.dtype, packed=True) == "dense":
        return _dense_packed(x, weights, ids, up, down, None, act, shared=(shared_up, shared_down))
    return mlp(x, shared_up, shared_down, None, act) + moe_experts(x, weights, ids, up, down, None, act)


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


def _dense_packs(up, down, gate, shared) -> tuple[torch.Tensor, ...]:
    """Packed (up rows [E*I (+S), H], down columns [H, E*I (+S)], gate rows [E*I, H] or nothing)."""
    E, I, H = up.shape
    up_rows, down_cols = up.reshape(E * I, H), down.permute(1, 0, 2).reshape(H, E * I)
    if shared is not None:
        up_rows, down_cols = torch.cat([up_rows, shared[0]]), torch.cat([down_cols, shared[1]], dim=1)
    packs = (onednn_packed.pack(up_rows), onednn_packed.pack(down_cols))
    return packs + ((onednn_packed.pack(gate.reshape(E * I, H)),) if gate is not None else ())


def _dense_packed(x, weights, ids, up, down, gate, act, shared=None):
    parts = (up, down) + ((gate,) if gate is not None else ()) + (shared or ())
    tag = "moe_dense" + ("_gated" if gate is not None else "") + ("_shared" if shared is not None else "")
    up_p, down_p, *gate_p = onednn_packed.packs_for(up, tag, parts, lambda: _dense_packs(up, down, gate, shared))
    T, (E, I, _) = x.shape[0], up.shape
    if gate is None and act == "relu2":  # max(0, .) fused into the product, the square in place
        h = onednn_packed.linear_packed(x, up_p, relu=True)
        h.mul_(h)
    else:
        h = onednn_packed.linear_packed(x, up_p)
        h = activation(act, onednn_packed.linear_packed(x, gate_p[0])) * h if gate is not None else activation(act, h)
    routing = x.new_zeros(T, E).scatter_add_(1, ids, weights.to(x.dtype))  # an expert picked twice counts twice
    h[:, :E * I].view(T, E, I).mul_(routing[:, :, None])  # the shared expert's columns keep weight 1
    return onednn_packed.linear_packed(h, down_p)


def _dense(x, weights, ids, up, down, gate, act, packed=False):
    if packed:
        return _dense_packed(x, weights, ids, up, down, gate, act)
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
