"""Start-up of the window, in fresh interpreters: no heavy imports, --screenshot, clean errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from PySide6.QtGui import QImage

from gui_helpers import NEMOTRON_H_56B

HEAVY = ("torch", "transformers", "numpy")
ENV = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}

FIRST_PAINT = """
import json, sys
from bringup.app.main import make_app
app = make_app()
from bringup.app.main_window import MainWindow
from bringup.core.sources.catalogue import DEFAULT_MODEL
w = MainWindow()
w.resize(1440, 900)
def painted():
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
    print(json.dumps({{"heavy": heavy, "cells": len(w.map_panel.view.map_layout().cells)}}))
    app.exit(0)
w.map_panel.view.painted.connect(painted)
w.show()
w.load(DEFAULT_MODEL)
app.exec()
"""


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=120, **kw)


def test_first_painted_map_imports_no_torch_transformers_or_numpy():
    proc = run([sys.executable, "-c", FIRST_PAINT.format(heavy=set(HEAVY))])
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"heavy": [], "cells": 52}


def test_screenshot_writes_the_window_as_png(tmp_path):
    out = tmp_path / "shot.png"
    proc = run([sys.executable, "-m", "bringup", "gui", str(NEMOTRON_H_56B), "--screenshot", str(out), "--size", "1200x800"])
    assert proc.returncode == 0, proc.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1200, 800)
    # The map is drawn: the attention orange appears in the image.
    orange = sum(1 for x in range(0, 1200, 3) for y in range(60, 400, 3)
                 if image.pixelColor(x, y).name() == "#e8913a")
    assert orange > 50


def test_screenshot_of_a_bad_source_exits_2_with_the_message(tmp_path):
    out = tmp_path / "shot.png"
    proc = run([sys.executable, "-m", "bringup", "gui", str(tmp_path / "nowhere"), "--screenshot", str(out)])
    assert proc.returncode == 2
    assert "nowhere" in proc.stderr and "Traceback" not in proc.stderr
    assert out.exists()  # the window, with the error banner, is still rendered


def test_bad_arguments_are_user_errors(tmp_path):
    proc = run([sys.executable, "-m", "bringup", "gui", "--screenshot", str(tmp_path / "x.jpg")])
    assert proc.returncode == 2 and "must name a .png" in proc.stderr and "Traceback" not in proc.stderr
    proc = run([sys.executable, "-m", "bringup", "gui", "--open", str(tmp_path / "x.log")])
    assert proc.returncode == 2 and "--open needs --tab" in proc.stderr


def test_qt_binding_keeps_none_alive():
    # PySide6 6.12.0 under Python 3.11 dropped a reference to None on every void call, so the
    # window died with "deallocating None" after a few thousand paints; pyproject excludes it.
    code = ("import sys\nfrom PySide6.QtCore import QObject\no = QObject()\nb = sys.getrefcount(None)\n"
            "for _ in range(1000): o.setObjectName('x')\nprint(sys.getrefcount(None) - b)")
    proc = run([sys.executable, "-c", code])
    assert proc.returncode == 0 and abs(int(proc.stdout.strip())) < 50, proc.stdout + proc.stderr
