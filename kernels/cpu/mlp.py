"""The dense feed-forward block and the routed experts on the CPU, with many-row products through oneDNN.

The arithmetic of kernels/reference/mlp.py and the "sorted" form of kernels/reference/moe_experts.py
(the form the CPU runs: each expert once on its block of assignments), with `linear` from
linear.py in place of F.linear: a prompt's products run about twice as fast, decode ones as before.
"""

from __future__ import annotations

import torch

from ..reference.mlp import activation
from .linear import linear


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
    out_sorted = torch.cat([mlp(rows, up[e], down[e], None if gate is None else gate[e], act)
                            for e, rows in enumerate(blocks) if counts[e]])
    per_assignment = torch.empty_like(out_sorted).index_copy_(0, order, out_sorted)
    return (per_assignment.view(T, k, -1).float() * weights[..., None].float()).sum(1).to(x.dtype)
