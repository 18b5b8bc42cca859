"""One decode step of LFM2's gated short conv on a state pool: the conv over B * x, gated by C."""

from __future__ import annotations

import torch

from .causal_conv1d_update_inplace import causal_conv1d_update_inplace


def short_conv_update_inplace(
    bcx: torch.Tensor,
    conv_states: torch.Tensor,
    slots: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
) -> torch.Tensor:
    """bcx [B, 3C]: LFM2's in_proj output, B, C and x side by side; conv_states [num_slots, C, K-1]
    (updated in place at `slots` [B]); weight [C, K]. Returns C * conv(B * x) [B, C] (no activation).
    The fast form (kernels/triton/causal_conv1d_update.py) does the two products inside the conv step."""
    B, C, x = bcx.chunk(3, dim=-1)
    return C * causal_conv1d_update_inplace(B * x, conv_states, slots, weight, bias, None)
