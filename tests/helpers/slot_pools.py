"""A state pool for the in-place decode kernels' tests: NaN in every slot but the batch's (scattered,
out of order), so a kernel that writes a slot it should not, or reads one, shows. Importable from the
interpreter tests' child scripts too (triton_interpreter.run_interpreted puts this folder on their path)."""

from __future__ import annotations

import torch


def nan_pool(batch: int, row_shape: tuple[int, ...], dtype=torch.float32, device="cpu"):
    """(pool [2 * batch + 1, *row_shape] of NaN with `batch` random slots filled from randn, those slots)."""
    pool = torch.full((2 * batch + 1, *row_shape), float("nan"), dtype=dtype, device=device)
    slots = torch.randperm(2 * batch + 1, device=device)[:batch]
    pool[slots] = torch.randn(batch, *row_shape, device=device).to(dtype)
    return pool, slots


def assert_only_slots_written(pool: torch.Tensor, slots: torch.Tensor) -> None:
    untouched = torch.ones(pool.shape[0], dtype=torch.bool, device=pool.device)
    untouched[slots] = False
    assert torch.isnan(pool[untouched]).all(), "a slot outside the batch was written"
