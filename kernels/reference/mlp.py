"""Dense feed-forward blocks: relu2 (NemotronH: down(relu(up x)^2)) and SwiGLU (down(silu(gate x) * up x))."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def activation(name: str, x: torch.Tensor) -> torch.Tensor:
    if name == "relu2":
        return torch.square(F.relu(x))
    if name in ("silu", "swish"):
        return F.silu(x)
    if name in ("gelu", "gelu_pytorch_tanh"):
        return F.gelu(x, approximate="tanh" if name == "gelu_pytorch_tanh" else "none")
    if name == "relu":
        return F.relu(x)
    raise ValueError(f"unsupported MLP activation {name!r}; supported: relu2, silu, gelu, gelu_pytorch_tanh, relu")


def mlp(
    x: torch.Tensor,
    up: torch.Tensor,
    down: torch.Tensor,
    gate: torch.Tensor | None = None,
    act: str = "relu2",
    up_bias: torch.Tensor | None = None,
    down_bias: torch.Tensor | None = None,
    gate_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """x [T, H]; up/gate [I, H], down [H, I] (nn.Linear layout). With gate: down(act(gate x) * up x)."""
    h = F.linear(x, up, up_bias)
    if gate is not None:
        h = activation(act, F.linear(x, gate, gate_bias)) * h
    else:
        h = activation(act, h)
    return F.linear(h, down, down_bias)
