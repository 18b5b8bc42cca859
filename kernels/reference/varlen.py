"""Helpers for ops that take several sequences laid back to back (not an op themselves)."""

from __future__ import annotations

from typing import Sequence

import torch


def pad_index(seq_starts: Sequence[int], device) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """For tokens laid back to back, each token's (sequence, position) in a [B, longest] padded
    layout: (rows [T], cols [T], B, longest)."""
    lengths = [e - s for s, e in zip(seq_starts[:-1], seq_starts[1:])]
    rows = [i for i, n in enumerate(lengths) for _ in range(n)]
    cols = [t for n in lengths for t in range(n)]
    return (torch.tensor(rows, dtype=torch.long, device=device), torch.tensor(cols, dtype=torch.long, device=device),
            len(lengths), max(lengths))
