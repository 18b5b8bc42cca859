"""Time from `python` start to the window's first painted layer map, next to a bare Qt import.

Each run is a fresh interpreter (offscreen Qt): it opens the main window on the default model and
stops at the map's first paint. Prints the median of several runs next to the median of a bare
`python -c "import PySide6.QtWidgets"`, and the ratio. Aim: under 1.5 s.

    python bench/window_paint.py [--runs 5] [--source NAME] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PROBE = """
import sys, time
t0 = float(sys.argv[1])
from bringup.app.main import make_app
app = make_app()
from bringup.app.main_window import MainWindow
w = MainWindow()
w.resize(1440, 900)
def painted():
    print(time.time() - t0)
    app.exit(0)
w.map_panel.view.painted.connect(painted)
w.show()
w.load(sys.argv[2])
app.exec()
"""


def _env() -> dict:
    return {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen")}


def time_first_paint(source: str) -> float:
    start = time.time()
    out = subprocess.run([sys.executable, "-c", PROBE, repr(start), source], capture_output=True, text=True,
                         env=_env(), check=True, timeout=120)
    return float(out.stdout.strip().splitlines()[-1])


def time_bare_qt() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import PySide6.QtWidgets"], check=True, env=_env(), timeout=60)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--source", default=None, help="model to open (default: the catalogue's default)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.source is None:
        from bringup.core.sources.catalogue import DEFAULT_MODEL

        args.source = DEFAULT_MODEL
    time_first_paint(args.source)  # warm the file cache once
    window = statistics.median(time_first_paint(args.source) for _ in range(args.runs))
    bare = statistics.median(time_bare_qt() for _ in range(args.runs))
    result = {"source": args.source, "runs": args.runs, "window_first_paint_s": round(window, 3),
              "bare_qt_import_s": round(bare, 3), "ratio": round(window / bare, 2), "goal_s": 1.5}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"window, first painted map ({args.source}): {window:.3f} s  (median of {args.runs})")
        print(f"bare python -c 'import PySide6.QtWidgets':  {bare:.3f} s")
        print(f"ratio: {window / bare:.2f}x   goal: under 1.5 s -> {'met' if window < 1.5 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
