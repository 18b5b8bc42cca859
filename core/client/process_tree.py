"""Ending a process and everything it started: one way, used by the window's engines, leftover
engines found at start, and the engine ending its own children when its window is gone.

A process started in its own session leads a process group (id = its pid) that holds everything it
started and outlives it, so its children are still reached after it died; descendants are also
listed before the root is signalled, because they re-parent once it dies.
"""

from __future__ import annotations

import os
import signal

import psutil


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _quietly(action) -> None:
    try:
        action()
    except psutil.NoSuchProcess:
        pass


def end_processes(procs: list[psutil.Process], timeout: float = 5.0) -> None:
    """SIGTERM each, SIGKILL those still there after `timeout`."""
    for p in procs:
        _quietly(p.terminate)
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for p in alive:
        _quietly(p.kill)
    psutil.wait_procs(alive, timeout=timeout)


def end_tree(pid: int, timeout: float = 5.0, *, group: bool = False) -> None:
    """End a process that is not our child, and all its descendants; with `group`, its process
    group too (a process in its own session)."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    procs = descendants(pid) + [root]
    if group:
        signal_group(pid, signal.SIGTERM)
    end_processes(procs, timeout)
    if group:
        signal_group(pid, signal.SIGKILL)  # whatever joined the group after we listed it
