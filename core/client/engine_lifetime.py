"""An engine never outlives the window that started it, whatever ends the window.

Three guards, because each covers what the others cannot:
- Parent-death signal (Linux): the kernel sends the engine SIGTERM the moment the window's process
  dies, SIGKILL included. Set in the child between fork and exec, so there is no gap.
- A pipe from the window (every POSIX system): the window holds the write end; when the window dies
  the kernel closes it, and `bringup serve` (which watches the read end) ends its whole process
  group. This also reaches the engine's own children and escalates to SIGKILL if SIGTERM is ignored.
- A pid file per engine under the cache dir: if all else failed (a crash of the machine's session,
  an engine that ignores signals), the next start finds the engine still holding its port and
  offers to end it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from bringup.core.client.process_tree import descendants, end_processes, end_tree, signal_group

# Where `bringup serve` finds the read end of the window's pipe (an inherited fd number).
PARENT_FD_ENV = "BRINGUP_PARENT_FD"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


# --- the window's side ---------------------------------------------------------------------------

def parent_death_preexec():
    """A `preexec_fn` asking the kernel to SIGTERM the child when its parent dies (Linux), or None.

    libc is loaded here, before fork, so the child only makes one C call between fork and exec.
    The signal follows the *thread* that forked: spawn engines from the GUI thread (they are)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def _set() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return _set


def engines_dir() -> Path:
    """`$BRINGUP_ENGINES_DIR`, else `$XDG_CACHE_HOME/bringup/engines` (~/.cache/bringup/engines)."""
    explicit = os.environ.get("BRINGUP_ENGINES_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bringup" / "engines"


@dataclass
class EngineRecord:
    """What the pid file says about one engine the window started."""

    pid: int
    created: float  # the engine's process start time: a reused pid is not our engine
    url: str
    argv: list[str]
    parent_pid: int
    parent_created: float
    path: Path | None = None

    @property
    def port(self) -> int | None:
        tail = self.url.rsplit(":", 1)[-1].split("/")[0]
        return int(tail) if tail.isdigit() else None

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.created))
        return f"pid {self.pid}, {self.url}, started {started}"


def record_engine(pid: int, url: str, argv: list[str]) -> Path | None:
    """Write the engine's pid file (atomically); None when the cache dir is not writable."""
    try:
        created = psutil.Process(pid).create_time()
        me = psutil.Process()
        folder = engines_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{pid}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": pid, "created": created, "url": url, "argv": _redacted(argv),
                                   "parent_pid": me.pid, "parent_created": me.create_time()}), encoding="utf-8")
        os.replace(tmp, path)
        return path
    except (OSError, psutil.Error):
        return None


def forget_engine(pid: int | None) -> None:
    if pid is None:
        return
    try:
        (engines_dir() / f"{pid}.json").unlink()
    except OSError:
        pass


def leftover_engines() -> list[EngineRecord]:
    """Engines from earlier sessions that still run although the window that started them is gone.

    Pid files of engines that ended are removed on the way (they are what a clean kill leaves)."""
    found = []
    folder = engines_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            rec = EngineRecord(int(data["pid"]), float(data["created"]), str(data["url"]), list(data["argv"]),
                               int(data["parent_pid"]), float(data["parent_created"]), path)
        except (OSError, ValueError, KeyError, TypeError):
            _unlink(path)  # half-written or foreign: nothing to offer
            continue
        if not _alive(rec.pid, rec.created):
            _unlink(path)
        elif not _alive(rec.parent_pid, rec.parent_created):
            found.append(rec)
        # else: a window that is still open owns it (a second window on this machine)
    return found


def end_leftover(rec: EngineRecord, timeout: float = 5.0) -> bool:
    """End a leftover engine and everything it started; True when it is gone."""
    if _alive(rec.pid, rec.created):
        end_tree(rec.pid, timeout, group=True)  # its own session: the group reaches its children
    gone = not _alive(rec.pid, rec.created)
    if gone and rec.path is not None:
        _unlink(rec.path)
    return gone


def _alive(pid: int, created: float) -> bool:
    try:
        p = psutil.Process(pid)
        return abs(p.create_time() - created) < 1.0 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _redacted(argv: list[str]) -> list[str]:
    """argv with the value after --api-key hidden: pid files and logs never hold the key."""
    return redact_argv(argv)


def redact_argv(argv: list[str]) -> list[str]:
    out, hide = [], False
    for arg in argv:
        if hide:
            out.append("***")
            hide = False
        elif arg.startswith("--api-key="):
            out.append("--api-key=***")
        else:
            out.append(arg)
            hide = arg == "--api-key"
    return out


# --- the engine's side ---------------------------------------------------------------------------

def watch_parent_pipe(grace_s: float = 3.0) -> bool:
    """In `bringup serve`: if the window passed a pipe, end this engine's process group when it
    closes (the window is gone). Returns whether a watch was started."""
    fd_text = os.environ.pop(PARENT_FD_ENV, "")
    if not fd_text.isdigit():
        return False
    fd = int(fd_text)

    def _watch() -> None:
        try:
            while os.read(fd, 1):  # the window never writes; EOF (b"") means it is gone
                pass
        except OSError:
            pass
        try:  # the window may have held our stdout too: a dead reader must not stop the ending
            print("bringup serve: the window that started this engine is gone; stopping the engine", flush=True)
        except OSError:
            pass
        _end_own_group(grace_s)

    threading.Thread(target=_watch, name="parent-watch", daemon=True).start()
    return True


def _end_own_group(grace_s: float) -> None:
    end_processes(descendants(os.getpid()), grace_s)
    if os.getpgrp() == os.getpid():  # our own session (the window starts us so): take the group too
        signal_group(os.getpgrp(), signal.SIGKILL)
    os._exit(0)
