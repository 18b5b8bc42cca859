"""An engine never outlives the window that started it, whatever ends the window.

Three guards, because each covers what the others cannot:
- Parent-death signal (Linux): the kernel sends the engine SIGTERM the moment the window's process
  dies, SIGKILL included. Set in the child between fork and exec, so there is no gap.
- A pipe from the window (every POSIX system): the window holds the write end; when the window dies
  the kernel closes it, and `bringup serve` (which watches the read end) ends its whole process
  group. This also reaches the engine's own children and escalates to SIGKILL if SIGTERM is ignored.
- A record per engine under the cache dir (core.client.engine_records): if all else failed (a crash
  of the machine's session, an engine that ignores signals), the next start finds the engine still
  holding its port and, once the record is proved to name that very engine, offers to end it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from bringup.core.client.process_tree import descendants, end_processes, signal_group

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
