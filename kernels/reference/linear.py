"""A dense linear layer, x @ weight^T + bias: the reference the Triton decode GEMV
(kernels/triton/dense_gemv.py) is tested against, and what runs wherever it is not registered."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    return F.linear(x, weight, bias)
