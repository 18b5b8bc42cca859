"""The dense feed-forward block on the CPU, with many-row products through oneDNN.

The arithmetic of kernels/reference/mlp.py with `linear` from linear.py in place of F.linear: a
prompt's products run about twice as fast, decode ones as before. `per_expert` gives a stacked
expert weight's per-expert views once per tensor (moe.py runs experts one by one on a prompt).
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
