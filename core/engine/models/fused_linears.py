"""Several linear layers that read the same input, held as one stacked weight: one GEMM instead of
one per layer (fused_qkv.py: q, k, v; fused_gate_up.py: a gated MLP's gate and up).

On first use the weights (and biases) are concatenated once and each layer's parameter is re-pointed
at its slice of the result, so the model holds the weights once, the checkpoint's names and shapes
stay, and a later in-place copy into a layer (a reload, a fault injection) lands in the stacked weight.
A layer whose storage was replaced since (its address moved) is stacked again.
"""

from __future__ import annotations

import torch

from bringup.core.engine.quantized import is_quantized


def fusing(flag: bool | None, hidden: torch.Tensor) -> bool:
    """A stacking switch (FusedQKV.fuse_qkv, FusedGateUp.fuse_gate_up): None means on where the device
    is not the CPU (whose linears are packed per weight: cpu_linears.py); tests force it."""
    return flag if flag is not None else hidden.device.type != "cpu"


def can_stack(parts) -> bool:
    """Layers whose product can be one GEMM: none quantized (fp8 keeps its own scales), and biases on
    all or on none."""
    return len({p.bias is None for p in parts}) == 1 and not any(is_quantized(p) for p in parts)


def stacked(owner, name: str, parts) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight [sum of outs, in], bias or None) of `parts` stacked in order, kept on `owner` as `name`."""
    key = tuple(p.weight.data_ptr() for p in parts)
    held = getattr(owner, f"_{name}_held", None)
    if held is None or held[0] != key:
        weight = torch.cat([p.weight.detach() for p in parts])
        biases = [p.bias for p in parts]
        bias = torch.cat([b.detach() for b in biases]) if all(b is not None for b in biases) else None
        start = 0
        for p in parts:
            n = p.weight.shape[0]
            p.weight.data = weight[start:start + n]
            if bias is not None:
                p.bias.data = bias[start:start + n]
            start += n
        held = (tuple(p.weight.data_ptr() for p in parts), weight, bias)
        setattr(owner, f"_{name}_held", held)
    return held[1], held[2]
