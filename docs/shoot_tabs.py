"""Render the Validate, Plan and Diagnose tabs to PNG, each on a scenario worth showing.

    python docs/shoot_tabs.py [FOLDER] [--model SOURCE]

writes FOLDER/validate.png (the PR #32227 launch: sglang 0.5.17 on XPU, the layer-0 finding
selected), FOLDER/plan.png (SGLang 0.5.23 on a 128 GB XPU) and FOLDER/diagnose.png (the
layer-index crash log of docs/examples, or a built-in copy of its key lines). Offscreen; the
probe is not run, so the pictures do not depend on this machine.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

CRASH_LINES = """\
[2026-07-23 10:00:01] Attention backend not specified. Use triton backend by default.
[2026-07-23 10:01:12 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/sglang/python/sglang/srt/layers/attention/triton_backend.py", line 101, in __init__
    self.v_head_dim = model_runner.token_to_kv_pool.get_value_buffer(0).shape[-1]
  File "/opt/sglang/python/sglang/srt/mem_cache/memory_pool.py", line 3649, in get_value_buffer
    layer_id = self._transfer_full_attention_id(layer_id)
ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])
"""
EXAMPLE_LOG = Path(__file__).resolve().parents[2] / "docs" / "examples" / "pr32227-example.log"


def _validate(tab) -> None:
    tab.set_settings(target="sglang==0.5.17", device="xpu")
    tab.validate()
    codes = [f["code"] for f in tab.findings.findings()]
    if "TRITON_LAYER0_PROBE" in codes:
        tab.findings.select(codes.index("TRITON_LAYER0_PROBE"))


def _plan(tab) -> None:
    from PySide6.QtCore import Qt

    tab.target.setCurrentText("sglang==0.5.23")
    tab.preset.setCurrentIndex(tab.preset.findText("Max 1550", Qt.MatchFlag.MatchContains))
    tab.replan()


def _diagnose(tab) -> None:
    if EXAMPLE_LOG.is_file():
        tab.open_file(str(EXAMPLE_LOG))
    else:
        tab.set_text(CRASH_LINES, "crash.log")


SCENES = {"Validate": _validate, "Plan": _plan, "Diagnose": _diagnose}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python docs/shoot_tabs.py", description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", default="docs", type=Path)
    parser.add_argument("--model", default=None, help="model source (default: the catalogue's default model)")
    parser.add_argument("--size", default="1440x900", help="window size WxH")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"folder {args.folder} does not exist")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QTimer

    from bringup.app.main import make_app
    from bringup.app.main_window import MainWindow

    if args.model is None:
        from bringup.core.sources.catalogue import DEFAULT_MODEL

        args.model = DEFAULT_MODEL
    app = make_app()
    window = MainWindow()
    window.resize(*(int(v) for v in args.size.lower().split("x")))
    window.show()
    pending = list(SCENES)
    failures: list[str] = []

    def shoot_next() -> None:
        if not pending:
            app.exit(1 if failures else 0)
            return
        title = pending.pop(0)
        tab = window.tab(title)
        if tab is None:
            failures.append(f"no {title} tab")
            QTimer.singleShot(0, shoot_next)
            return
        if hasattr(tab, "probe_on_show"):
            tab.probe_on_show = False  # the pictures must not depend on this machine
        window.tabs.setCurrentWidget(tab)
        window.map_panel.set_highlight(None)  # marks from the previous scene
        SCENES[title](tab)

        def grab() -> None:
            app.processEvents()
            path = args.folder / f"{title.lower()}.png"
            if not window.grab().save(str(path), "PNG", 0):
                failures.append(f"could not write {path}")
            else:
                print(path)
            QTimer.singleShot(0, shoot_next)

        QTimer.singleShot(400, grab)

    started = {"done": False}

    def on_settled() -> None:
        if not started["done"]:
            started["done"] = True
            QTimer.singleShot(0, shoot_next)

    window.settled.connect(on_settled)
    window.loader.failed.connect(lambda text: (failures.append(text), app.exit(2)))
    window.load(args.model)
    code = app.exec()
    for failure in failures:
        print(f"screenshots: {failure}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
