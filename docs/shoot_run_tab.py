"""Render docs/run.png: the Run tab with the bundled engine under load (run from the repo root).

    .venv/bin/python docs/shoot_run_tab.py [OUT.png] [--seconds 25]
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QTimer  # noqa: E402

from bringup.app.main import make_app  # noqa: E402
from bringup.app.main_window import MainWindow  # noqa: E402
from bringup.core.sources.catalogue import DEFAULT_MODEL  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?", default="docs/run.png")
    parser.add_argument("--seconds", type=float, default=25.0, help="load time before the capture")
    args = parser.parse_args()
    app = make_app()
    window = MainWindow()
    window.resize(1440, 900)
    window.show()

    def on_settled() -> None:
        window.settled.disconnect(on_settled)
        window.open_tab("Run")
        run = window.tab("Run")
        run.device.setCurrentText("cpu")
        run.controller.ready.connect(lambda _url: start_load(run))
        run.controller.crashed.connect(lambda code, _tail: app.exit(3))
        run.start()

    def start_load(run) -> None:
        run.load.concurrency.setValue(6)
        run.load.start()
        run.side.setCurrentWidget(run.log)
        QTimer.singleShot(int(args.seconds * 1000), lambda: capture(run))

    def capture(run) -> None:
        ok = window.grab().save(args.out, "PNG", 0)
        print(f"{'wrote' if ok else 'could not write'} {args.out}")
        run.shutdown()
        app.exit(0 if ok else 2)

    window.settled.connect(on_settled)
    window.load(DEFAULT_MODEL)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
