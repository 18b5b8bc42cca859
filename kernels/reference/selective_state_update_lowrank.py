"""Jamba's Mamba (v1) decode step from x_proj's output: the dt/B/C RMSNorms and the low-rank dt_proj
product, then `selective_state_update_inplace`.

x_dbl [b, R + 2N] is x_proj's output (dt_low | B | C); dt_proj_weight [D, R] (dt_proj's bias goes in
as dt_bias, with the softplus); norm_weights is None (plain Mamba) or (dt_w [R], b_w [N], c_w [N])
with one eps (Jamba). This is the model's unfused composition exactly (the reference rms_norm,
F.linear, the reference state update), so the CPU's results stay what they were; a fast form does it
all in the state update's launch (kernels/triton/selective_scan.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .rms_norm import rms_norm
from .selective_scan import selective_state_update_inplace


def selective_state_update_lowrank_inplace(
    ssm_states: torch.Tensor,
    slots: torch.Tensor,
    x: torch.Tensor,
    x_dbl: torch.Tensor,
    dt_proj_weight: torch.Tensor,
    A: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = True,
    norm_weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    eps: float = 1e-6,
) -> torch.Tensor:
    """ssm_states [num_slots, D, N] (updated in place), slots [b], x/z [b, D], x_dbl [b, R + 2N],
    dt_proj_weight [D, R], A [D, N]. Returns y [b, D] in x's dtype."""
    R, N = dt_proj_weight.shape[1], A.shape[1]
    dt, B, C = x_dbl.split([R, N, N], dim=-1)
    if norm_weights is not None:
        dt_w, b_w, c_w = norm_weights
        dt, B, C = rms_norm(dt, dt_w, eps), rms_norm(B, b_w, eps), rms_norm(C, c_w, eps)
    dt = F.linear(dt, dt_proj_weight)
    return selective_state_update_inplace(ssm_states, slots, x, dt, A, B, C, D, z, dt_bias, dt_softplus)
