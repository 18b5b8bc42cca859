"""Timing shared by the benchmark scripts: median wall time with the device synchronised."""

from __future__ import annotations

import statistics
import time

import torch


def sync(device: torch.device) -> None:
    """Wait for queued device work, so a timing covers the kernels and not just their launch."""
    if device.type != "cpu":
        torch.accelerator.synchronize(device)


def median_ms(fn, device: torch.device, repeat: int = 10, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        sync(device)
        t = time.perf_counter()
        fn()
        sync(device)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)
