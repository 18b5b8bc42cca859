"""The routed SwiGLU experts' output in the form the model's residual add takes (stack.py): where the
device has the fused gated MoE's unsummed form, (None, each assignment's weighted output [T, k, H]),
summed by the next add + norm in its own launch; elsewhere the experts op's summed [T, H]."""

from __future__ import annotations

import torch


def swiglu_experts(ops, hidden: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor, gate: torch.Tensor,
                   up: torch.Tensor, down: torch.Tensor):
    unsummed = getattr(ops, "moe_gated_experts_unsummed", None)
    if unsummed is not None:
        return (None, unsummed(hidden, weights, ids, gate, up, down, "silu"))
    return ops.moe_experts(hidden, weights, ids, up, down, gate, "silu")
