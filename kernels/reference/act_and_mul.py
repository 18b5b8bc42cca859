"""A gated MLP's middle: act(gate) * up, from the one product of a gate/up weight stacked [gate; up].

x [..., 2I] holds the gate projection in its first I columns and the up projection in the last I
(core/engine/models/fused_gate_up.py makes that product). Rounded as the unfused model computes it:
the activation to x's dtype first, then the product."""

from __future__ import annotations

import torch

from .mlp import activation


def act_and_mul(x: torch.Tensor, act: str) -> torch.Tensor:
    """[..., I]: activation(act, x[..., :I]) * x[..., I:]."""
    if x.shape[-1] % 2:
        raise ValueError(f"act_and_mul: the last dimension ({x.shape[-1]}) is not gate and up halves of one width")
    gate, up = x.chunk(2, dim=-1)
    return activation(act, gate) * up
