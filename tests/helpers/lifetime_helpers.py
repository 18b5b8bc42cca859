"""Processes for the engine-lifetime tests: a real window process with a started engine, and an
engine that a window left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import psutil

# The app, offscreen, with its Run tab: starts the bundled engine on CPU and says when it is ready.
WINDOW_WITH_ENGINE = textwrap.dedent("""\
    import os, sys
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from bringup.app import tabs
    tabs.TAB_FACTORIES = ["bringup.app.tabs.run_tab:RunTab"]
    from bringup.app.main import make_app
    from bringup.app.main_window import MainWindow
    app = make_app()
    window = MainWindow(remember=False)
    window.show()
    window.build_tabs()
    run = window.tab("Run")
    run.device.setCurrentText("cpu")
    run.controller.ready.connect(lambda url: print("READY", run.controller.process.pid, url, flush=True))
    run.controller.crashed.connect(lambda code, tail: print("CRASHED", code, *tail[-5:], sep="\\n", flush=True))
    run.start()
    app.exec()
""")

# Started by a window that then dies: it ignores SIGTERM and never looks at the lifeline, as a hung
# engine would, so it outlives its window. Its command line is the engine's own (`python -m bringup
# serve ...`): a stand-in `bringup` package in its working folder answers to it, so the record it
# leaves passes the same proof a real engine's does.
STUBBORN_ENGINE = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(120)"
LEAVE_BEHIND = textwrap.dedent(f"""\
    import os, sys, tempfile, time
    from bringup.core.client.engine_process import EngineProcess
    stand_in = tempfile.mkdtemp(prefix="stand-in-engine-")
    os.mkdir(os.path.join(stand_in, "bringup"))
    open(os.path.join(stand_in, "bringup", "__init__.py"), "w").close()
    with open(os.path.join(stand_in, "bringup", "__main__.py"), "w") as f:
        f.write({STUBBORN_ENGINE!r})
    p = EngineProcess([sys.executable, "-m", "bringup", "serve", "--port", "39999"], cwd=stand_in,
                      url="http://127.0.0.1:39999")
    p.start()
    while "up" not in p.lines:
        time.sleep(0.05)
    print("ENGINE", p.pid, flush=True)
    os._exit(0)  # the window dies without stopping it
""")


# A window without the parent-death signal (as on macOS): only the lifeline pipe ties the engine to
# it, and the engine's log pipe dies with it too (its first write after that fails).
PIPE_ONLY_WINDOW = textwrap.dedent("""\
    import os, subprocess, sys, time
    from bringup.core.client.engine_lifetime import PARENT_FD_ENV
    read_end, write_end = os.pipe()
    engine = subprocess.Popen([sys.executable, "-m", "bringup", "serve", "default", "--device", "cpu", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                              pass_fds=(read_end,), env=dict(os.environ, **{PARENT_FD_ENV: str(read_end)}))
    os.close(read_end)
    engine.stdout.readline()  # its first log line: the watch is on
    print("ENGINE", engine.pid, flush=True)
    time.sleep(120)
""")


def read_until(proc: subprocess.Popen, prefix: str, timeout: float) -> str:
    """The first stdout line starting with `prefix`; fails with what the process printed."""
    lines = _lines_of(proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hit = next((line for line in list(lines) if line.startswith(prefix)), None)
        if hit is not None:
            return hit
        if proc.poll() is not None and not proc._reader.is_alive():
            break
        time.sleep(0.05)
    raise AssertionError(f"no {prefix!r} line; the process printed:\n" + "\n".join(lines[-30:]))


def _lines_of(proc: subprocess.Popen) -> list[str]:
    """The lines a reader thread collects from the process's stdout (one thread per process)."""
    if not hasattr(proc, "_lines"):
        proc._lines = []

        def _read() -> None:
            for line in proc.stdout:
                proc._lines.append(line.rstrip("\n"))

        proc._reader = threading.Thread(target=_read, daemon=True)
        proc._reader.start()
    return proc._lines


def spawn_python(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, timeout: float) -> bool:
    """Poll (a bound, not a speed claim) until the process has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.1)
    return gone(pid)
