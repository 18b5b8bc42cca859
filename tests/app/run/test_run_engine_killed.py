"""An engine killed mid-run (OOM killer, kill -9) is reported as killed, with its likely cause, and leaves no orphan."""

import os
import signal
import sys
import textwrap

import psutil

from bringup.app.tabs.run_tab import RunTab
from bringup.core.exit_status import exit_text, likely_cause

# A stand-in engine that says it is ready, starts a child of its own, and waits to be killed.
READY = textwrap.dedent("""\
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print("[2026-07-23 10:00:00] The server is fired up and ready to roll!", flush=True)
    print(f"child {child.pid}", flush=True)
    time.sleep(60)
""")


def test_exit_text_names_the_signal():
    assert exit_text(2) == "exited with code 2"
    assert exit_text(-signal.SIGKILL) == "was killed by SIGKILL"
    assert "out of memory" in likely_cause(-signal.SIGKILL)
    assert likely_cause(1) == ""


def test_killed_engine_is_reported_as_killed_and_its_tree_is_gone(qtbot, no_orphans):
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.controller.launch([sys.executable, "-c", READY], "http://127.0.0.1:1")
    proc = tab.controller.process
    qtbot.waitUntil(lambda: any(line.startswith("child ") for line in proc.tail(5)), timeout=20000)
    grandchild = int(next(line for line in proc.tail(5) if line.startswith("child ")).split()[1])
    with qtbot.waitSignal(tab.controller.crashed, timeout=20000) as crashed:
        os.kill(proc.pid, signal.SIGKILL)
    assert crashed.args[0] == -signal.SIGKILL
    text = tab.stage.text()
    assert "killed by SIGKILL" in text and "out of memory" in text
    assert "ready to roll" not in text  # the last log line is not the reason
    assert tab.start_button.isEnabled()
    qtbot.waitUntil(lambda: not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE,
                    timeout=10000)
