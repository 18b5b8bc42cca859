"""A gated MLP in three launches: gate and up as one GEMM over one [gate; up] weight (stacked once:
fused_linears.py), act(gate) * up in one kernel (ops.act_and_mul), then down. Unfused it takes five
(two products, the activation, the product, down). On by default on accelerators; the CPU keeps
its own MLP op (its linears are packed per weight: cpu_linears.py); quantized layers keep theirs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bringup.core.engine.quantized import is_quantized
from bringup.kernels.reference.mlp import activation

from .fused_linears import can_stack, fusing, stacked


class FusedGateUp:
    """Mixed into an MLP module with gate_proj, up_proj, down_proj, `ops` and `act`."""

    fuse_gate_up: bool | None = None  # None: on where the device is not the CPU; tests force it

    def gated_mlp(self, hidden: torch.Tensor) -> torch.Tensor:
        """down(act(gate x) * up x) of hidden [T, H]."""
        gate, up, down = self.gate_proj, self.up_proj, self.down_proj
        if fusing(self.fuse_gate_up, hidden) and can_stack((gate, up)) and not is_quantized(down):
            weight, bias = stacked(self, "gate_up", (gate, up))
            return F.linear(self.ops.act_and_mul(F.linear(hidden, weight, bias), self.act), down.weight, down.bias)
        if is_quantized(up) or is_quantized(down) or is_quantized(gate):
            return down(activation(self.act, gate(hidden)) * up(hidden))
        return self.ops.mlp(hidden, up.weight, down.weight, gate.weight, self.act, up.bias, down.bias, gate.bias)
