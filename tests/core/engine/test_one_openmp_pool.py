"""A build on a thread that ends leaves no OpenMP pool behind, so the thread that steps the engine
owns the only one (more pooled threads than cores make libgomp's workers sleep after 100 spins)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from bringup.core.engine.one_openmp_pool import run_on_ending_thread
from bringup.core.errors import UserError


def test_the_result_comes_back_from_a_thread_that_has_ended():
    ran_on = []

    def build():
        ran_on.append(threading.current_thread())
        return "engine"

    assert run_on_ending_thread(build) == "engine"
    assert ran_on[0] is not threading.current_thread() and not ran_on[0].is_alive()


def test_the_builds_error_is_raised_in_the_caller():
    def build():
        raise UserError("--cpu-threads 0 must be at least 1")

    with pytest.raises(UserError, match="at least 1"):
        run_on_ending_thread(build)


# In a fresh process, the OS threads once an engine-like thread steps (a parallel region on a thread
# that stays): `main` builds (a parallel region) and steps on the main thread, as `bringup bench`
# does; `serve` builds through run_on_ending_thread and steps on a loop thread, as `bringup serve`
# does; `two` builds on the main thread and steps on a loop thread (the pool the build left stays).
# The loop thread itself is not counted. (torch keeps a pthreadpool beside OpenMP, hence no fixed count.)
POOLS = r"""
import os, sys, threading, time, torch
from bringup.core.engine.one_openmp_pool import run_on_ending_thread

def threads():
    return len(os.listdir("/proc/self/task"))

def parallel():
    torch.set_num_threads(2)
    return float(torch.ones(1 << 22).sum())  # far above ATen's grain: an OpenMP team of 2

def settled(previous):
    deadline = time.monotonic() + 30  # an ending thread's workers leave just after it
    while threads() != previous and time.monotonic() < deadline:
        previous = threads()
        time.sleep(0.2)
    return threads()

how = sys.argv[1]
if how == "main":
    parallel()
    parallel()
    print(settled(-1))
else:
    if how == "serve":
        assert run_on_ending_thread(parallel) == 1 << 22
    else:
        parallel()
    stepped, done = threading.Event(), threading.Event()
    loop = threading.Thread(target=lambda: (parallel(), stepped.set(), done.wait()))
    loop.start()
    stepped.wait()
    print(settled(-1) - 1)
    done.set()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/task and libgomp are Linux's")
def test_the_thread_that_steps_the_engine_owns_the_only_pool():
    import torch

    if "OpenMP" not in torch.__config__.parallel_info():
        pytest.skip("torch runs without OpenMP here")

    def count(how: str) -> int:
        out = subprocess.run([sys.executable, "-c", POOLS, how], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return int(out.stdout)

    one_pool = count("main")
    assert count("two") > one_pool  # the build's pool stays beside the loop's
    assert count("serve") == one_pool
