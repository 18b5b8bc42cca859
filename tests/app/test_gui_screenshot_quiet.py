"""`bringup gui --screenshot` prints nothing but real problems: no offscreen-plugin noise, and an empty
QT_QPA_PLATFORM still renders offscreen."""

import os
import subprocess
import sys
from pathlib import Path

from bringup.app.qt_messages import NOISE

from repo_paths import NANO_CONFIG, REPO

NANO = NANO_CONFIG


def test_screenshot_stderr_is_clean(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    env.update(QT_QPA_PLATFORM="", HF_HUB_OFFLINE="1")
    png = tmp_path / "window.png"
    done = subprocess.run([sys.executable, "-m", "bringup", "gui", str(NANO), "--screenshot", str(png)],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert png.stat().st_size > 10_000
    assert not any(noise in done.stderr for noise in NOISE), done.stderr


def test_other_qt_warnings_still_print():
    code = ("from PySide6.QtCore import qWarning; from bringup.app.qt_messages import quiet_known_noise; "
            "quiet_known_noise(); qWarning('This plugin does not support propagateSizeHints()'); qWarning('real trouble')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "real trouble"
