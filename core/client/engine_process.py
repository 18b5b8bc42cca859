"""An engine server as a child process: start on a free port, stream its log, stop its whole tree.

Orphans keep device memory and ports, and make the next launch fail, so `stop()` ends every process
the engine started (it runs in its own session) before returning, and the child is tied to this
process's life (core.client.engine_lifetime): it also ends when the window is killed outright.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import threading
import time
from typing import Callable


from bringup.core.client import engine_lifetime, engine_records
from bringup.core.client.process_tree import descendants, end_processes, signal_group


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now (another process may take it before we do; the engine then
    fails with a busy-port message that the GUI shows)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EngineProcess:
    """One engine child. `on_line` is called from a reader thread for each log line."""

    def __init__(self, argv: list[str], *, env: dict | None = None, cwd: str | None = None,
                 on_line: Callable[[str], None] | None = None, keep_lines: int = 5000, url: str = "") -> None:
        self.argv = list(argv)
        self.url = url  # for the pid file: what a later start names when it finds this engine left over
        self._lifeline: int | None = None  # write end of the pipe the engine watches
        self.env = env
        self.cwd = cwd
        self.on_line = on_line
        self.lines: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self.proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self.started_at: float | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        if self.proc is not None:
            raise RuntimeError("engine process already started")
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # The lifeline: only the engine inherits the read end; our write end is close-on-exec, so
        # it closes exactly when this process ends, however it ends.
        read_end, self._lifeline = os.pipe()
        env[engine_lifetime.PARENT_FD_ENV] = str(read_end)
        try:
            self.proc = subprocess.Popen(
                self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                text=True, encoding="utf-8", errors="replace", bufsize=1, env=env, cwd=self.cwd,
                start_new_session=True,  # its own process group: stop() can end the whole tree
                pass_fds=(read_end,), preexec_fn=engine_lifetime.parent_death_preexec(),
            )
        except BaseException:
            self._close_lifeline()
            raise
        finally:
            os.close(read_end)
        engine_records.record_engine(self.proc.pid, self.url, self.argv)
        self.started_at = time.monotonic()
        self._reader = threading.Thread(target=self._read, name="engine-log", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc and self.proc.stdout
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if self.on_line:
                try:
                    self.on_line(line)
                except Exception:  # a broken listener must not stop the log
                    pass

    def poll(self) -> int | None:
        """The exit code once the process has ended, else None."""
        return None if self.proc is None else self.proc.poll()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, n: int = 20) -> list[str]:
        return list(self.lines)[-n:]

    def wait_log_drained(self, timeout: float = 2.0) -> None:
        """After exit, let the reader thread pass on the last lines (crash tracebacks)."""
        if self._reader:
            self._reader.join(timeout)

    def end_leftovers(self) -> None:
        """The engine died on its own (crash, OOM kill): end what it started, which would otherwise
        live on as orphans holding device memory and ports."""
        if self.proc is not None and self.proc.poll() is not None:
            signal_group(self.proc.pid, signal.SIGKILL)
            self._forget()

    def _close_lifeline(self) -> None:
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None

    def _forget(self) -> None:
        """The engine is gone: no pid file to find at the next start, no pipe to hold."""
        self._close_lifeline()
        engine_records.forget_engine(self.pid)

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM the whole tree, SIGKILL what is left after `timeout`; returns the exit code."""
        if self.proc is None:
            return None
        children = descendants(self.proc.pid)  # before the root dies and they re-parent
        signal_group(self.proc.pid, signal.SIGTERM)  # its own session: the group holds the tree
        try:
            code = self.proc.wait(timeout=timeout)  # our child: its exit code, through Popen
        except subprocess.TimeoutExpired:
            signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.kill()
            code = self.proc.wait(timeout=timeout)
        end_processes(children, timeout)
        self._forget()
        self.wait_log_drained()
        return code
