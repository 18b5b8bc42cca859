"""SIGTERM to the window quits through Qt's event loop (aboutToQuit stops engines), not an abrupt death."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from repo_paths import NANO_CONFIG, REPO

NANO = NANO_CONFIG


def test_sigterm_quits_the_window_cleanly():
    if os.name != "posix":
        return
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bringup", "gui", str(NANO)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(4)  # the window is up and its event loop runs
        assert proc.poll() is None, proc.communicate()[1]
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0  # the event loop quit; -15 would mean Python's default SIGTERM ended it mid-flight
