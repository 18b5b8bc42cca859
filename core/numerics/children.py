"""Run a numerics child process: its own session (a hang is ended whole), stderr kept for the finding."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass


@dataclass
class ChildResult:
    returncode: int | None  # None: it ran past the timeout and was ended
    stdout: str
    stderr: str

    @property
    def crashed(self) -> bool:
        return self.returncode is not None and self.returncode < 0  # killed by a signal (segfault, abort)

    def tail(self, lines: int = 6) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-lines:])


def run_child(module: str, args: list[str], *, env: dict | None = None, timeout: float = 600) -> ChildResult:
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=full_env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return ChildResult(proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return ChildResult(None, out, err)
    except BaseException:  # Ctrl-C in the parent: leave no orphan behind
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
