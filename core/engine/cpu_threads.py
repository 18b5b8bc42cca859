"""How many threads torch's CPU ops get in an engine that runs on the CPU.

torch starts one OpenMP thread per core, and a team of threads runs only as fast as its slowest
member: when another process holds one of those cores, every parallel op waits for the thread that
was descheduled, spinning meanwhile. On this project's 2-core build machine at a load average of
about 3, the bench's engine ran 12x slower with 2 threads than with 1 and burned 9x the CPU time
(28.8 s against 2.3 s for the same 553 tokens); transformers' `generate` did the same (264 s against
9.9 s). So an engine takes the cores that are idle when it starts: the cores it may use minus the
load average (rounded), at least one. `--cpu-threads N` sets the number instead.
"""

from __future__ import annotations

import os

from bringup.core.errors import UserError


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The 1-minute load average, or None where the OS has none (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def idle_cores(cores: int, load: float | None) -> int:
    """Cores not already taken by other work: a core counts as taken once the load covers half of it."""
    if load is None:
        return cores
    return max(1, min(cores, cores - int(load + 0.5)))


def choose_cpu_threads(requested: int | None = None) -> tuple[int, str]:
    """(threads, why) for a CPU engine: `requested` when given, else the idle cores."""
    if requested is not None:
        if requested < 1:
            raise UserError(f"--cpu-threads {requested} must be at least 1")
        return requested, "as requested"
    cores, load = usable_cores(), load_average()
    threads = idle_cores(cores, load)
    if load is None:
        return threads, f"{cores} usable cores"
    return threads, f"{cores} usable cores, load average {load:.2f}: {threads} idle"


def apply_cpu_threads(requested: int | None = None) -> tuple[int, str]:
    """Set torch's intra-op threads for this process (a CPU engine owns its process); returns (threads, why)."""
    import torch

    threads, why = choose_cpu_threads(requested)
    torch.set_num_threads(threads)
    return threads, why
