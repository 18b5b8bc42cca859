"""No display, or Qt's X11 plugin missing a library: a clear message and exit 2, not Qt's abort."""

import os
import subprocess
import sys
from pathlib import Path

from bringup.app.display_check import display_problem, load_error

from repo_paths import REPO


def test_what_counts_as_a_display():
    if not sys.platform.startswith("linux"):
        return
    assert "no display" in display_problem({})
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}) is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}) is None
    assert "no display" in display_problem({"QT_QPA_PLATFORM": "xcb"})


def test_a_library_that_cannot_load_is_named(tmp_path):
    fake = tmp_path / "libqxcb.so"
    fake.write_text("not a shared object")
    error = load_error(fake)
    assert error and str(tmp_path) not in error  # the loader's reason, without our own path in front


def test_gui_and_demo_without_a_display_exit_2_with_the_fix(tmp_path):
    if not sys.platform.startswith("linux"):
        return
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    for command, hint in (("gui", "bringup gui --screenshot"), ("demo", "bringup demo --screenshot")):
        done = subprocess.run([sys.executable, "-m", "bringup", command], capture_output=True, text=True, cwd=REPO,
                              env=env, timeout=60)
        assert done.returncode == 2, done.stderr
        assert "no display" in done.stderr and hint in done.stderr
        assert "Traceback" not in done.stderr
