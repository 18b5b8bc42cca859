"""Run a numerics child process: its own session (a hang is ended whole), stderr kept for the finding.

Its stderr is read line by line as it comes (`on_line` sees each, so a long run can show where it is);
a child that runs past its time may first be asked for its threads' stacks (`stacks_on_timeout`:
SIGUSR1, which a child with `faulthandler.register(SIGUSR1)` answers on stderr), so a stall names the
line it sits in before it is ended. Windows has neither SIGUSR1 nor process groups: there the child
is ended by a plain kill, and its stage lines alone say where it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass

STACK_WAIT = 3.0  # seconds a child is given to write its stacks before it is ended


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


def _reader(stream, lines: list[str], on_line) -> threading.Thread:
    def read():
        for line in stream:
            lines.append(line)
            if on_line is not None:
                try:
                    on_line(line.rstrip("\n"))
                except Exception:  # noqa: BLE001 - a display's failure must not stop the pipe being drained
                    pass
        stream.close()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def can_ask_for_stacks() -> bool:
    """Whether a child can be asked for its stacks (SIGUSR1: POSIX only)."""
    return hasattr(signal, "SIGUSR1")


def run_child(module: str, args: list[str], *, env: dict | None = None, timeout: float = 600, on_line=None,
              stacks_on_timeout: bool = False) -> ChildResult:
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=full_env, start_new_session=True)
    out: list[str] = []
    err: list[str] = []
    readers = [_reader(proc.stdout, out, None), _reader(proc.stderr, err, on_line)]

    def end():
        try:
            if hasattr(os, "killpg"):
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except ProcessLookupError:
            pass
        proc.wait()
        for r in readers:  # a grandchild outside the group could hold the pipe open: do not wait on it
            r.join(timeout=STACK_WAIT)

    try:
        proc.wait(timeout=timeout)
        for r in readers:
            r.join()
        return ChildResult(proc.returncode, "".join(out), "".join(err))
    except subprocess.TimeoutExpired:
        if stacks_on_timeout and can_ask_for_stacks():
            try:
                os.kill(proc.pid, signal.SIGUSR1)
                proc.wait(timeout=STACK_WAIT)  # it goes on after writing them: this wait runs out
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        end()
        return ChildResult(None, "".join(out), "".join(err))
    except BaseException:  # Ctrl-C in the parent: leave no orphan behind
        end()
        raise
