"""Linear layers on the CPU: weights stored transposed, so each small-batch product streams its weight row by row.

A linear layer computes x @ W.T with W [out, in]. For the few rows of a decode step, MKL's
product reads a weight stored [in, out] (W.T contiguous) up to 1.7x faster than one stored [out,
in] (measured on this project's 2-core machine: a [128, 256] weight at 8 rows, 57.5 against 33.0 us
when cold in cache; the whole bench's engine run about 6% less CPU time). So on the CPU each linear
weight keeps its [out, in] shape and values but lives in an [in, out] buffer: the model's code is
unchanged (`F.linear` sees the transposed view and calls the faster product). Stacked expert weights
[E, out, in], used one expert at a time through `F.linear`, get the same layout per expert.
Embeddings keep rows (a lookup reads rows), and so does a weight tied to one.

The layers also become `CpuLinear`, whose product goes through oneDNN from a few rows (decode
batches and prompts; kernels/cpu/linear.py says why), unless BRINGUP_KERNELS=reference asks for
plain torch. Their float32 weights get their packed oneDNN copies now (kernels/cpu/onednn_packed.py:
as much memory again, which the engine reports beside its weights as packed_weights_bytes), not at
the first batch; the MoE's packed expert stacks are made by its first batch wide enough for them
(kernels/cpu/moe.py).
"""

from __future__ import annotations

import torch
from torch import nn

from bringup.kernels.cpu import onednn_packed
from bringup.kernels.cpu.linear import linear as cpu_linear
from bringup.kernels.dispatch import kernel_choice

# Attribute names of stacked expert weights [E, out, in] that the reference MoE applies with F.linear.
EXPERT_WEIGHT_NAMES = ("up_proj", "down_proj", "gate_proj", "w1", "w2", "w3", "input_linear", "output_linear")


class CpuLinear(nn.Linear):
    """nn.Linear whose product picks MKL or oneDNN by the number of rows (same values)."""

    def forward(self, x):
        return cpu_linear(x, self.weight, self.bias)


def prepare_linears_for_cpu(model: nn.Module) -> int:
    """Re-lay the model's linear weights as above (values and shapes unchanged), and pack them unless
    packing is off (onednn_packed.ENABLED); returns how many were re-laid."""
    tied = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    done = 0
    own_products = kernel_choice() != "reference"
    for module in model.modules():
        if own_products and type(module) is nn.Linear:
            module.__class__ = CpuLinear
        for name, p in module.named_parameters(recurse=False):
            linear_weight = isinstance(module, nn.Linear) and name == "weight" and p.dim() == 2
            expert_stack = p.dim() == 3 and name in EXPERT_WEIGHT_NAMES
            if (linear_weight or expert_stack) and id(p) not in tied and p.is_contiguous():
                p.data = p.data.transpose(-1, -2).contiguous().transpose(-1, -2)
                done += 1
            if own_products and linear_weight and isinstance(module, CpuLinear) and onednn_packed.USABLE \
                    and onednn_packed.ENABLED and p.dtype == torch.float32:
                onednn_packed.packed_weight(p)
    return done
