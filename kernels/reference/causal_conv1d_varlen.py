"""Depthwise causal conv1d over several sequences of different lengths in one call, each continuing
from its own saved state (see causal_conv1d for one sequence)."""

from __future__ import annotations

from typing import Sequence

import torch

from .causal_conv1d import _activate, depthwise_taps
from .varlen import int_tensor, pad_index


def causal_conv1d_varlen(
    x: torch.Tensor,
    seq_starts: Sequence[int],
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    initial_states: torch.Tensor | None,
    activation: str | None = "silu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, C] (sequences back to back at seq_starts, B + 1 offsets), weight [C, K],
    initial_states [B, C, K-1] or None (zeros).

    Returns (y [T, C], final_states [B, C, K-1]): each sequence's last K-1 inputs, its state
    included when the sequence is shorter than K-1.
    """
    C, K = x.shape[1], weight.shape[-1]
    rows, cols, nseq, tmax = pad_index(seq_starts, x.device)
    padded = x.new_zeros(nseq, tmax, C)
    padded[rows, cols] = x
    if initial_states is None:
        initial_states = x.new_zeros(nseq, C, K - 1)
    seq = torch.cat([initial_states.to(x.dtype), padded.transpose(1, 2)], dim=-1)  # [B, C, K-1+tmax]
    y = depthwise_taps(seq.to(weight.dtype), weight, bias, tmax)  # [B, C, tmax]
    y = _activate(y, activation).transpose(1, 2)[rows, cols].to(x.dtype)
    lengths = int_tensor([e - s for s, e in zip(seq_starts[:-1], seq_starts[1:])], x.device)
    tail = lengths[:, None] + torch.arange(K - 1, device=x.device)[None, :]  # columns of the last K-1 inputs
    final = seq.gather(2, tail[:, None, :].expand(nseq, C, K - 1))
    return y, final


def causal_conv1d_varlen_inplace(
    x: torch.Tensor,
    seq_starts: Sequence[int],
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    conv_states: torch.Tensor,
    slots: torch.Tensor,
    has_state: torch.Tensor,
    activation: str | None = "silu",
) -> torch.Tensor:
    """The same over a state pool conv_states [num_slots, C, K-1]: sequence i starts from
    conv_states[slots[i]] where has_state[i] (a fresh prompt starts from zeros whatever its slot
    holds) and leaves its last K-1 inputs there. Returns y [T, C]."""
    slots = slots.to(device=conv_states.device, dtype=torch.long)
    has = has_state.to(device=conv_states.device, dtype=torch.bool)
    initial = torch.where(has[:, None, None], conv_states[slots], 0)
    y, final = causal_conv1d_varlen(x, seq_starts, weight, bias, initial, activation)
    conv_states[slots] = final.to(conv_states.dtype)
    return y
