"""The dense feed-forward block and the routed experts on the CPU, with many-row products through oneDNN.

The arithmetic of kernels/reference/mlp.py and the "sorted" form of kernels/reference/moe_experts.py
(the form the CPU runs: each expert once on its block of assignments), with `linear` from
linear.py in place of F.linear: a prompt's products run about twice as fast, decode ones as before.
A decode step runs every expert of every MoE layer on one or two rows, so the per-expert Python
is kept short: the experts' weight views are made once per weight tensor, not per step.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

from ..reference.mlp import activation
from .linear import linear

_VIEWS: OrderedDict = OrderedDict()  # (address, shape, strides) of a stacked weight -> its per-expert views
_VIEWS_KEPT = 512  # more than the stacked expert weights of any model


def per_expert(stacked: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """stacked[0], stacked[1], ... (views), made once per weight tensor. Views see in-place changes,
    and they keep the tensor alive, so its address cannot be reused by another while remembered."""
    key = (stacked.data_ptr(), tuple(stacked.shape), tuple(stacked.stride()))
    views = _VIEWS.get(key)
    if views is None:
        views = _VIEWS[key] = stacked.unbind(0)
        if len(_VIEWS) > _VIEWS_KEPT:
            _VIEWS.popitem(last=False)
    return views


def mlp(x, up, down, gate=None, act="relu2", up_bias=None, down_bias=None, gate_bias=None):
    """As the reference: x [T, H]; up/gate [I, H], down [H, I]."""
    h = linear(x, up, up_bias)
    h = activation(act, linear(x, gate, gate_bias)) * h if gate is not None else activation(act, h)
    return linear(h, down, down_bias)


def moe_experts(x, weights, ids, up, down, gate=None, act="relu2", strategy=None):
    """As the reference: x [T, H]; weights/ids [T, k]; up [E, I, H], down [E, H, I]; returns [T, H].
    `strategy` is accepted for the reference's signature; the CPU always runs the sorted form."""
    T, k = ids.shape
    if T * k == 0:
        return x.new_zeros(T, down.shape[1])
    flat = ids.reshape(-1)
    order = flat.argsort(stable=True)
    counts = torch.bincount(flat, minlength=up.shape[0]).tolist()
    blocks = x.index_select(0, order // k).split(counts)  # one block of rows per expert, in expert order
    ups, downs = per_expert(up), per_expert(down)
    gates = per_expert(gate) if gate is not None else (None,) * len(counts)
    out_sorted = torch.cat([mlp(rows, ups[e], downs[e], gates[e], act) for e, rows in enumerate(blocks) if counts[e]])
    per_assignment = torch.empty_like(out_sorted).index_copy_(0, order, out_sorted)
    return (per_assignment.view(T, k, -1).float() * weights[..., None].float()).sum(1).to(x.dtype)
