"""The fastest of a few launch configurations of a kernel, timed once per shape on the device itself.

The H200 and an Intel GPU want different tiles for the same GEMV, and neither can be measured
here; so a kernel lists a few candidates (the first its default) and the first eager call of a
shape times each on the device (`TilePicker.pick`) and keeps the fastest for that shape. Why not
triton.autotune: a shape first met while a CUDA graph is being captured would be benchmarked inside
the capture (synchronising there breaks it); here such a call, like every call on the CPU
interpreter, takes the default without timing anything. The engine runs each decode step eagerly
before capturing it (decode_graphs._DeviceGraph.capture), so the graphs capture the picked tiles.

Each candidate is timed as REPS launches of the real call, each after a write of twice the L2
cache (a decode step reads each weight once, from memory, not from a cache a repeat warmed) and a
spin of the device (torch.cuda._sleep, where the backend has it) while the host enqueues the call:
what is timed is the device's work, as a graph replays it, not the host's launch overhead (a call
of several launches would otherwise carry the time its host code takes to enqueue them).
A picker made with `timer=` times with it instead, on any device (tests, on a CPU).
"""

from __future__ import annotations

import time
from typing import Callable, Hashable, Sequence

import torch

REPS = 10
WARMUP_CALLS = 2  # compiles the candidate and settles the allocator before timing
HEAD_START_CYCLES = 500_000  # ~0.3 ms at the H200's clock: longer than the host takes to enqueue a call
TIMED_DEVICE_TYPES = ("cuda", "xpu")


def _backend(device: torch.device):
    return getattr(torch, device.type, None)


def capturing(device: torch.device) -> bool:
    backend = _backend(device)
    check = getattr(backend, "is_current_stream_capturing", None)
    return bool(check and check())


def _l2_bytes(device: torch.device) -> int:
    try:
        return int(getattr(_backend(device).get_device_properties(device), "L2_cache_size", 0) or 0)
    except (AttributeError, RuntimeError):
        return 0


class TilePicker:
    """Per (device, shape key): the chosen configuration, and every candidate's time (for benches)."""

    def __init__(self, name: str, timer: Callable[[torch.device, Callable[[], None]], float] | None = None):
        self.name = name
        self.timer = timer  # (device, call) -> us per call; None: the device's own events (`_time`)
        self.chosen: dict[tuple, object] = {}
        self.timings: dict[tuple, list[tuple[object, float]]] = {}  # key -> [(config, us per call)]
        self.failures: dict[tuple, list[tuple[object, str]]] = {}  # key -> [(config, why it did not run)]
        self.seconds = 0.0  # spent picking (compiles included): what tuning adds to a warm-up

    def pick(self, device: torch.device, key: Hashable, candidates: Sequence, launch: Callable[[object], None]):
        """The configuration to launch `key` with; the first eager device call times every candidate
        with `launch(config)` (the call's own arguments: its output is simply written again)."""
        full = (str(device), key)
        if full in self.chosen:
            return self.chosen[full]
        if len(candidates) == 1 or not self.can_time(device):
            return candidates[0]
        started = time.monotonic()
        times, failed = [], []
        timer = self.timer or self._time
        for config in candidates:
            try:
                times.append((config, timer(device, lambda config=config: launch(config))))
            except Exception as exc:  # a candidate this device or Triton cannot compile: the others still run
                failed.append((config, exc))
        if not times:
            raise failed[0][1]
        self.timings[full], self.failures[full] = times, [(c, f"{type(e).__name__}: {e}") for c, e in failed]
        self.chosen[full] = min(times, key=lambda t: t[1])[0]
        self.seconds += time.monotonic() - started
        return self.chosen[full]

    def can_time(self, device: torch.device) -> bool:
        """Whether a first call on `device` is timed now (else it takes the first candidate)."""
        return (self.timer is not None or device.type in TIMED_DEVICE_TYPES) and not capturing(device)

    @staticmethod
    def _time(device: torch.device, call: Callable[[], None]) -> float:
        backend = _backend(device)
        for _ in range(WARMUP_CALLS):
            call()
        flush = torch.empty(max(1, 2 * _l2_bytes(device)), dtype=torch.uint8, device=device)
        spin = getattr(backend, "_sleep", None)
        times = []
        for _ in range(REPS):
            flush.fill_(0)
            if spin is not None:
                spin(HEAD_START_CYCLES)
            start, end = backend.Event(enable_timing=True), backend.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        del flush
        return sorted(times)[len(times) // 2]

    def clear(self) -> None:
        self.chosen.clear()
        self.timings.clear()
        self.failures.clear()
        self.seconds = 0.0

