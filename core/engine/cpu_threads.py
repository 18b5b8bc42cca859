"""How many threads torch's CPU ops get in an engine that runs on the CPU.

torch starts one OpenMP thread per core, and a team of threads runs only as fast as its slowest
member: when another process holds one of those cores, every parallel op waits for the thread that
was descheduled, spinning meanwhile. On this project's 2-core build machine at a load average of
about 3, the bench's engine ran 12x slower with 2 threads than with 1 and burned 9x the CPU time
(28.8 s against 2.3 s for the same 553 tokens); transformers' `generate` did the same (264 s against
9.9 s). So an engine takes the cores that are idle when it starts: the cores it may use minus the
cores other work keeps busy (rounded), at least one. `--cpu-threads N` sets the number instead.

How busy the machine is comes from the kernel's CPU time counters (/proc/stat) read SAMPLE_S
apart: the time the cores really ran. The load average is only the fallback (where there is no
/proc/stat): it also counts tasks that wait without running, and on this project's machine it sat
at 0.75 with both cores idle, which made every engine take one thread of two.
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


SAMPLE_S = 0.1


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all the machine's cores since boot, or None without /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return sum(values) - values[3] - values[4], sum(values)


def busy_cores(sample_s: float = SAMPLE_S) -> tuple[float, str] | None:
    """(cores other work keeps busy, how it was measured), or None where nothing tells."""
    import time

    before = _cpu_times()
    if before is not None:
        time.sleep(sample_s)
        after = _cpu_times()
        if after is not None and after[1] > before[1]:
            share = (after[0] - before[0]) / (after[1] - before[1])
            busy = share * (os.cpu_count() or 1)
            return busy, f"{busy:.2f} busy over {sample_s:.1f} s"
    load = load_average()
    return None if load is None else (load, f"load average {load:.2f}")


def idle_cores(cores: int, busy: float | None) -> int:
    """Cores not already taken by other work: a core counts as taken once it is half busy."""
    if busy is None:
        return cores
    return max(1, min(cores, cores - int(busy + 0.5)))


# Cores are reserved for the process's other threads whenever the engine keeps at least this many.
# The figures that once favoured a reserve on 2 cores (commit 2ae729d, c880474: 2 threads 80-84
# served tok/s against 177-223 with 1) came from a second OpenMP pool that throttled the team's
# spinning (one_openmp_pool.py). Without it, default model, `bringup bench`'s requests at 8 streams
# on 2 cores (bench/serving_vs_engine.py default --device cpu --levels 8 --vs-bench --serve-flags
# '--cpu-threads N', interleaved, 2026-12-04): 1 thread 192-201, 2 threads 230-253 (bench: 268-276).
# Above 2 cores the reserve is kept, unmeasured: one core of three is a smaller share to give up.
MIN_THREADS_BESIDE_RESERVE = 2


def choose_cpu_threads(requested: int | None = None, reserved: int = 0) -> tuple[int, str]:
    """(threads, why) for a CPU engine: `requested` when given, else the idle cores less `reserved`
    (the cores the process's other threads need: `bringup serve`'s HTTP event loop, whose turns
    stall the thread team, as another process's do), unless that would leave the engine fewer than
    MIN_THREADS_BESIDE_RESERVE threads: then all the idle cores."""
    if requested is not None:
        if requested < 1:
            raise UserError(f"--cpu-threads {requested} must be at least 1")
        return requested, "as requested"
    cores, measured = usable_cores(), busy_cores()
    idle = cores if measured is None else idle_cores(cores, measured[0])
    threads = idle - reserved if idle - reserved >= MIN_THREADS_BESIDE_RESERVE else idle
    why = f"{cores} usable cores" + ("" if measured is None else f", {measured[1]}: {idle} idle")
    if reserved and threads < idle:
        why += f", {idle - threads} left to the server's event loop"
    elif reserved and idle > 1:
        why += (f", none left to the server's event loop (that would leave the engine fewer than "
                f"{MIN_THREADS_BESIDE_RESERVE} thread{'s' if MIN_THREADS_BESIDE_RESERVE > 1 else ''})")
    return threads, why


def apply_cpu_threads(requested: int | None = None, reserved: int = 0) -> tuple[int, str]:
    """Set torch's intra-op threads for this process (a CPU engine owns its process); returns (threads, why)."""
    import torch

    threads, why = choose_cpu_threads(requested, reserved)
    torch.set_num_threads(threads)
    return threads, why
