"""`bringup gui [SOURCE] [--screenshot PNG]`: open the workbench window (also what plain `bringup` runs).

Start-up imports Qt and the layer-map code only: no torch, transformers or numpy (tests check it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bringup.core.errors import UserError

WINDOW_SIZE = (1440, 900)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", nargs="?", default=None,
                        help="model to open: catalogue name, hub id, config.json or model folder "
                             "(default: the catalogue's default model)")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel stages to show on the map (default 1)")
    parser.add_argument("--screenshot", metavar="PNG", type=Path, default=None,
                        help="render the window to this PNG once the model is shown, then exit")
    parser.add_argument("--tab", metavar="TITLE", default=None,
                        help="open on this tab (e.g. Diagnose) once the model is shown")
    parser.add_argument("--open", metavar="FILE", type=Path, default=None,
                        help="hand a file to that tab, e.g. a crash log to Diagnose (needs --tab)")
    parser.add_argument("--size", metavar="WxH", default=None,
                        help="window size, e.g. 1366x768 (default: the size it had last time, kept within the "
                             f"screen; at first {WINDOW_SIZE[0]}x{WINDOW_SIZE[1]} or less on a smaller screen)")


def _parse_size(text: str | None) -> tuple[int, int]:
    if not text:
        return WINDOW_SIZE
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UserError(f"--size {text!r} is not WIDTHxHEIGHT; use e.g. --size 1440x900") from None
    if w < 400 or h < 300:
        raise UserError(f"--size {text} is too small; use at least 400x300")
    return w, h


def make_app():
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication(sys.argv[:1])
        app.setApplicationName("Bring-up Workbench")
        app.setDesktopFileName("io.github.bringup.Workbench")  # Wayland: the taskbar finds the .desktop icon by this
        from bringup.app.main_window import app_icon

        app.setWindowIcon(app_icon())  # X11 taskbars and the window decorations
        app.setStyle("Fusion")
        # The map is drawn light; keep the widgets light too, whatever the desktop's theme.
        app.setPalette(app.style().standardPalette())
    return app


def main(args: argparse.Namespace) -> int:
    if args.pp < 1:
        raise UserError(f"--pp {args.pp} must be at least 1")
    size = _parse_size(args.size)
    screenshot: Path | None = args.screenshot
    if screenshot is not None:
        if screenshot.suffix.lower() != ".png":
            raise UserError(f"--screenshot {screenshot} must name a .png file")
        if not screenshot.parent.exists():
            raise UserError(f"--screenshot: folder {screenshot.parent} does not exist; create it or pick another path")
        # A screenshot needs no display: render offscreen unless the user chose a platform.
        os.environ["QT_QPA_PLATFORM"] = os.environ.get("QT_QPA_PLATFORM") or "offscreen"

    if args.open is not None and args.tab is None:
        raise UserError("--open needs --tab, the tab to hand the file to (e.g. --tab Diagnose)")
    if args.open is not None and not args.open.is_file():
        raise UserError(f"--open {args.open}: no such file")
    source = args.source
    if source is None:
        from bringup.core.sources.catalogue import DEFAULT_MODEL

        source = DEFAULT_MODEL

    from bringup.app.display_check import display_problem

    problem = display_problem()
    if problem:
        raise UserError(problem)
    app = make_app()
    from bringup.app.quit_signals import quit_on_signals

    quit_on_signals(app)
    from bringup.app.qt_messages import quiet_known_noise

    quiet_known_noise()
    from bringup.app.main_window import MainWindow

    window = MainWindow(remember=screenshot is None)
    if args.size or screenshot is not None:  # a screenshot is the same whatever the user's window remembers
        window.resize(*size)
    else:
        window.restore_state()
    outcome: dict[str, str] = {}
    if args.tab is not None:
        def open_tab() -> None:
            window.settled.disconnect(open_tab)
            problem = window.open_tab(args.tab, str(args.open) if args.open else None)
            if problem:
                outcome.setdefault("error", problem)

        window.settled.connect(open_tab)
    if screenshot is not None:
        window.loader.failed.connect(lambda text: outcome.setdefault("error", text))
        window.settled.connect(lambda: _shoot(window, screenshot, app))
    window.show()
    window.load(source, args.pp)
    code = app.exec()
    if not window.loader.wait(2000):
        # A hub download still blocks its thread: a QThread destroyed while running aborts the
        # process, so leave without tearing Qt down.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if "error" in outcome:
        raise UserError(outcome["error"])
    return code


def _shoot(window, path: Path, app) -> None:
    from PySide6.QtCore import QTimer

    def grab() -> None:
        app.processEvents()
        if not window.grab().save(str(path), "PNG", 0):  # 0: smallest file (PNG is lossless)
            print(f"bringup gui: could not write {path}", file=sys.stderr)
            app.exit(2)
            return
        window.close()
        app.exit(0)

    QTimer.singleShot(150, grab)  # let the tabs lay out and paint once
