"""Helpers for ops that take several sequences laid back to back (not an op themselves)."""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import torch


def pad_index(seq_starts: Sequence[int], device) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """For tokens laid back to back, each token's (sequence, position) in a [B, longest] padded
    layout: (rows [T], cols [T], B, longest). Cached: every layer of a forward pass asks the same."""
    return _pad_index(tuple(int(s) for s in seq_starts), str(torch.device(device)))


@lru_cache(maxsize=32)
def _pad_index(seq_starts: tuple[int, ...], device: str):
    # Built on the host whatever torch's default device (then copied once): pinning needs CPU tensors.
    lengths = torch.tensor([e - s for s, e in zip(seq_starts[:-1], seq_starts[1:])], device="cpu")
    rows = torch.repeat_interleave(torch.arange(len(lengths), device="cpu"), lengths)
    cols = torch.arange(seq_starts[-1] - seq_starts[0], device="cpu") - torch.repeat_interleave(
        torch.tensor(seq_starts[:-1], device="cpu") - seq_starts[0], lengths)
    rows, cols = _to_device(torch.stack([rows, cols]), device)
    return rows, cols, len(lengths), int(lengths.max())


def _to_device(host: torch.Tensor, device: str) -> torch.Tensor:
    """One copy to `device`; on CUDA from pinned memory without waiting for the device's queue."""
    if torch.device(device).type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)


def int_tensor(values: Sequence[int], device) -> torch.Tensor:
    """A small int64 tensor of `values` on `device`, cached like pad_index (every layer of a forward
    pass asks for the same lengths; on a GPU each fresh copy would wait for the device). Read only."""
    return _int_tensor(tuple(int(v) for v in values), str(torch.device(device)))


@lru_cache(maxsize=64)
def _int_tensor(values: tuple[int, ...], device: str) -> torch.Tensor:
    return _to_device(torch.tensor(values, dtype=torch.long, device="cpu"), device)


def scan_each_sequence(single_scan):
    """A `mamba_chunk_scan_varlen` built from a one-sequence `mamba_chunk_scan` (e.g. a fast one that
    has no varlen form yet): one call per sequence, same arguments and results as the varlen op."""

    def mamba_chunk_scan_varlen(x, dt, A, B, C, seq_starts, chunk_size, D=None, dt_bias=None, initial_states=None,
                                dt_softplus=True, dt_limit=(0.0, float("inf"))):
        ys, finals = [], []
        for i, (s, e) in enumerate(zip(seq_starts[:-1], seq_starts[1:])):
            y, final = single_scan(x[s:e], dt[s:e], A, B[s:e], C[s:e], chunk_size, D, dt_bias,
                                   None if initial_states is None else initial_states[i], dt_softplus, dt_limit)
            ys.append(y)
            finals.append(final)
        return torch.cat(ys), torch.stack(finals)

    return mamba_chunk_scan_varlen
