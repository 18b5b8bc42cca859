"""A serving engine that decodes eagerly at once while its compiled CPU decode step is built beside it.

Compiling the default model's decode step took 45 s of a 46 s first start of `bringup serve` on the
2-core build box; the eager step serves from the first second, slower. So the server starts with
the eager step and:
1. a child process (decode_step_build.py) loads the same model, builds pools of the same shapes
   and compiles and saves the step to the file a later start loads (saved_decode_step.py): dynamo,
   inductor and the C++ compiler run in their own process, not in the server's threads and OpenMP
   pool (one_openmp_pool.py); a saved step already there skips the child;
2. the child runs on one core (inductor's compile threads 1), and while it runs the engine steps
   with one thread fewer: a thread team stalls whenever another process takes one of its cores
   (cpu_threads.py; decoding 8 requests eagerly with 2 threads beside a busy process ran at 9 tok/s,
   with 1 thread at 106). It keeps the server's priority: at nice +10 it starved whenever the server
   was busy (the default model served one client eagerly at 48 tok/s for 180 s and the build never
   finished, on the shared 2-core box); at the same priority it finished in 142 s of that load, the
   eager steps ran at 25 tok/s meanwhile and the compiled ones at 71 after;
3. when the file is there, a thread that ends (no OpenMP pool kept) loads it while the engine keeps
   stepping: the first load in a process also probes the CPU's vector ISA and imports inductor
   (2.7 s of the default model's load on the build box);
4. `poll()`, which the engine calls between steps, puts the loaded step in place: the next decode
   step runs compiled, with the engine's threads back. Compiled and eager steps give the same greedy
   tokens (tests/core/engine/test_engine_background_decode.py), so a request spanning the switch
   reads as one run. A batch the loaded step's guards refuse runs eagerly (never a trace here).

A failed build or load leaves the eager step, said once in the log. `stop()` (Engine.close, and at
the interpreter's exit) ends the child's process group; the child also ends by itself when the
server dies (decode_step_build.py).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

STOP_WAIT_S = 2.0  # for the child to end after its stdin closes, before SIGKILL


class BackgroundDecodeStep:
    """The compiled decode step of `runner` on its way: building (in a child), loading (on a thread),
    in use, or failed. Its methods are called from the thread that steps the engine."""

    def __init__(self, runner, spec: dict, *, threads: int, log):
        self.runner, self.spec, self.threads, self.log = runner, spec, int(threads), log
        self.path = Path(spec["path"])
        self.state = "loading"  # building | loading | in use | failed
        self.started = time.monotonic()
        self.error: str | None = None
        self.result: dict = {}  # the child's account (decode_step_build.py), when it ran
        self.pid: int | None = None
        self.load_seconds: float | None = None
        self.ready_after: float | None = None  # seconds from the start to the switch
        self._proc: subprocess.Popen | None = None
        self._dir: Path | None = None
        self._loader: threading.Thread | None = None
        self._loaded = None  # the CompiledDecode the loader made, or the error it raised
        # Where a file is already saved (a later start) there is nothing to build.
        if self.path.is_file():
            self._start_loading()
        else:
            self._start_building()
        if self.state != "failed" and self.threads > 1:
            torch.set_num_threads(self.threads - 1)  # until the switch (2. in the docstring)
        atexit.register(self.stop)

    # ---- what runs now ---------------------------------------------------------------------
    def describe(self) -> str:
        """What the engine's decode steps are, in the log's words."""
        if self.state == "building":
            return f"decoding eagerly while the compiled step builds (pid {self.pid})"
        if self.state == "loading":
            return "decoding eagerly while the saved compiled step loads"
        if self.state == "in use":
            return f"compiled decode step in use after {self.ready_after:.1f} s"
        return f"decoding eagerly: the compiled step could not be built ({self.error})"

    def info(self) -> dict:
        """For /server_info."""
        return {"state": self.state, "pid": self.pid, "path": str(self.path), "error": self.error,
                "build": self.result or None, "load_seconds": _round(self.load_seconds),
                "in_use_after_seconds": _round(self.ready_after), "threads_while_building": self._fewer_threads()}

    def _fewer_threads(self) -> int:
        return max(1, self.threads - 1)

    # ---- the child -------------------------------------------------------------------------
    def _start_building(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="bringup-decode-build-"))
        spec = {**self.spec, "result": str(self._dir / "result.json")}
        (self._dir / "spec.json").write_text(json.dumps(spec))
        with open(self._dir / "build.log", "wb") as out:
            try:
                # stdin: a pipe the child reads to its end, which comes when this process closes it or
                # dies; its own process group, so that stop() ends the compilers it started too.
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "bringup.core.engine.decode_step_build", str(self._dir / "spec.json")],
                    stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, process_group=0)
            except OSError as err:
                self._fail(f"the build process did not start: {err}")
                return
        self.pid = self._proc.pid
        self.state = "building"

    def _finish_building(self) -> None:
        code = self._proc.returncode
        try:
            self.result = json.loads((self._dir / "result.json").read_text())
        except (OSError, ValueError):
            self.result = {"ok": False, "error": f"the build process ended (exit code {code}) without a result"
                                                 f"{_last_line(self._dir / 'build.log')}"}
        self._proc = None
        self._remove_dir()
        if self.result.get("ok") and self.path.is_file():
            self._start_loading()
        else:
            self._fail(self.result.get("error") or f"the build process ended with exit code {code}")

    # ---- the load, off the stepping thread -------------------------------------------------
    def _start_loading(self) -> None:
        self.state = "loading"
        model, path = self.runner.model, self.path

        def load() -> None:
            started = time.monotonic()
            try:
                from .cpu_compiled_decode import CompiledDecode

                compiled = CompiledDecode(model, traces=False)
                # Loaded in the mode the steps run in: the guards it builds take their dispatch keys
                # from the loading thread's mode, and refuse every batch otherwise.
                with torch.inference_mode():
                    compiled.load_saved(path)
                self._loaded = compiled
            except Exception as err:  # noqa: BLE001 - the eager step goes on; the log says why
                from .cpu_compiled_decode import error_summary

                self._loaded = RuntimeError(f"loading {path} failed: {error_summary(err)}")
            self.load_seconds = time.monotonic() - started

        self._loader = threading.Thread(target=load, name="decode-step-load", daemon=True)
        self._loader.start()

    # ---- between steps ---------------------------------------------------------------------
    def poll(self) -> bool:
        """Move on if the build or the load is done (a syscall when neither is); True at the switch."""
        if self.state == "building" and self._proc.poll() is not None:
            self._finish_building()
        if self.state != "loading" or self._loader.is_alive():
            return False
        loaded, self._loaded = self._loaded, None
        if isinstance(loaded, BaseException):
            self._fail(str(loaded))
            return False
        torch.set_num_threads(self.threads)
        self.runner.compiled_decode = loaded
        self.ready_after = time.monotonic() - self.started
        self.state = "in use"
        built = self.result
        how = (f"built in pid {self.pid} in {built.get('seconds', 0):.1f} s ({built.get('how')}"
               f"{', ' + built['phases'] if built.get('phases') else ''})" if built else f"{loaded.how}")
        again = f"; {self.threads} threads again" if self.threads > 1 else ""
        self.log(f"CPU: {self.describe()}: {how}; loaded in {self.load_seconds:.2f} s beside the eager steps{again}")
        return True

    def _fail(self, error: str) -> None:
        self.state, self.error = "failed", error
        torch.set_num_threads(self.threads)
        self.log(f"CPU: {self.describe()}; decode steps stay eager (--cpu-compile on compiles at start-up instead)")

    # ---- the end ---------------------------------------------------------------------------
    def wait(self, timeout: float) -> bool:
        """Poll until the step is in use or has failed, or `timeout` seconds pass (tests, benches);
        whether it is in use."""
        end = time.monotonic() + timeout
        while self.state in ("building", "loading") and time.monotonic() < end:
            if self._loader is not None and self._loader.is_alive():
                self._loader.join(0.05)
            else:
                time.sleep(0.05)
            self.poll()
        return self.state == "in use"

    def stop(self) -> None:
        """End the build (its process group: the child and its compilers) and forget its files."""
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                proc.stdin.close()  # the child ends its group itself (decode_step_build.py) ...
                proc.wait(STOP_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # ... or here (not reaped yet: still its group)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
            if self.state == "building":
                self.state, self.error = "failed", "stopped before it was built"
        self._remove_dir()

    def _remove_dir(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _last_line(log: Path) -> str:
    try:
        lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return f": {lines[-1][:300]}" if lines else ""
