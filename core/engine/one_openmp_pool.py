"""Build an engine on a thread that ends, so that the thread which steps it owns the process's only
OpenMP pool.

libgomp (torch's OpenMP on Linux) gives every thread that starts a parallel region a pool of
worker threads, kept for as long as that thread lives. Once the pools hold more threads than the
machine has cores, every worker spins 100 times instead of 300,000 before it sleeps (libgomp's
"throttled" spin count, wait.h): each parallel region then wakes its team through the kernel.
`bringup serve` built its engine on the main thread (the load, the compile and the warm-up run
parallel regions) and stepped it on its loop thread: two pools. In one process, 2 threads on 2
cores, the default model ran `bringup bench`'s requests at 288 tok/s on the thread that built it
(1,556 voluntary context switches) and at 175 on a second thread (441,818). A pool goes when its
thread ends, so a build on a thread that ends leaves the stepping thread's pool the only one.
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")


def run_on_ending_thread(fn: Callable[[], T], name: str = "engine-build") -> T:
    """fn() on a new thread that ends when fn returns: fn's result, or fn's exception raised here.
    The thread is a daemon, so a Ctrl-C during a long build still ends the process."""
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller
            box["error"] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]
