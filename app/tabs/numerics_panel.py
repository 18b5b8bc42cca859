"""Validate's "Numerics" page: compare each block with the reference, and check every kernel.

Both run `bringup compare --json` / `bringup check-kernels --json` as child processes, waited on from
a plain thread (the window never imports torch and never freezes); results come back through queued
signals. The comparison's table is coloured by relative error against the tolerance, and its finding
(the first block beyond tolerance) is sent to the layer map as a Highlight.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QLineEdit, QPushButton, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from bringup.app.layermap.highlight import Highlight


class CommandRunner(QObject):
    """Runs one `bringup SUBCOMMAND ... --json` child at a time; `finished(kind, document or error text)`."""

    finished = Signal(str, object)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, kind: str, argv: list[str]) -> bool:
        if self.running:
            return False
        self._thread = threading.Thread(target=self._run, args=(kind, argv), name=f"numerics-{kind}", daemon=True)
        self._thread.start()
        return True

    def _run(self, kind: str, argv: list[str]) -> None:
        proc = subprocess.run([sys.executable, "-m", "bringup", *argv, "--json"], capture_output=True, text=True)
        try:
            result: object = json.loads(proc.stdout)
        except json.JSONDecodeError:
            result = (proc.stderr.strip().splitlines() or [f"bringup {argv[0]} exited with code {proc.returncode}"])[-1]
        try:
            self.finished.emit(kind, result)
        except RuntimeError:  # the panel is gone (window closed)
            pass


def error_colour(rel_err, tolerance) -> QColor:
    """Green well within tolerance, through amber, to red beyond it (NaN: red)."""
    if rel_err is None or tolerance is None or not rel_err <= tolerance:
        return QColor("#e06666")
    share = rel_err / tolerance if tolerance > 0 else 0.0
    return QColor("#93c47d") if share < 0.5 else QColor("#ffd966")


class NumericsPanel(QWidget):
    highlight_requested = Signal(object)
    compare_finished = Signal(object)  # the compare document (or an error text), for tests and the report
    kernels_finished = Signal(object)  # the check-kernels document (or an error text)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.source: str | None = None
        self.device = QLineEdit("cpu")
        self.device.setToolTip("the device to check: cpu, cuda, cuda:N, xpu")
        self.compare_button = QPushButton("Compare")
        self.compare_button.setToolTip("each block's output on the device against the float32 CPU reference")
        self.kernels_button = QPushButton("Check kernels")
        self.status = QLabel("Compare each block's output with the float32 CPU reference, or check every kernel.")
        self.status.setWordWrap(True)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["block / kernel", "kind", "rel err", "max abs", "ok"])
        self.table.setMinimumWidth(0)  # a side page: it must not widen the window
        layout = QVBoxLayout(self)
        for widgets in ((QLabel("Device"), self.device), (self.compare_button, self.kernels_button)):
            row = QHBoxLayout()
            for w in widgets:
                row.addWidget(w)
            layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 1)
        self.runner = CommandRunner(self)
        self.runner.finished.connect(self._done)
        self.compare_button.clicked.connect(lambda: self.start("compare"))
        self.kernels_button.clicked.connect(lambda: self.start("check-kernels"))

    def set_layer_map(self, layer_map) -> None:
        self.source = getattr(layer_map, "source", None) if layer_map is not None else None

    def start(self, kind: str, extra: list[str] | None = None) -> bool:
        argv = [kind, self.source or "default", "--device", self.device.text().strip() or "cpu", *(extra or [])]
        if not self.runner.start(kind, argv):
            return False
        self.compare_button.setEnabled(False)
        self.kernels_button.setEnabled(False)
        self.status.setText(f"running bringup {' '.join(argv)} ...")
        return True

    def _done(self, kind: str, result) -> None:
        self.compare_button.setEnabled(True)
        self.kernels_button.setEnabled(True)
        if isinstance(result, str):
            self.status.setText(f"{kind} failed: {result}")
        elif kind == "compare":
            self._show_compare(result)
        else:
            self._show_kernels(result)
        (self.compare_finished if kind == "compare" else self.kernels_finished).emit(result)

    def _fill(self, rows) -> None:
        self.table.setRowCount(len(rows))
        for r, (cells, colour) in enumerate(rows):
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 2 and colour is not None:
                    item.setBackground(colour)
                self.table.setItem(r, c, item)

    def _show_compare(self, doc: dict) -> None:
        tol = doc.get("tolerance")
        rows = []
        for l in doc.get("layers", []):
            cells = [str(l["index"]), l["mixer"] if l["mixer"] != "none" else l["ffn"], f"{l['rel_err']:.2e}",
                     f"{l['max_abs_err']:.2e}", "yes" if l["rel_err"] <= tol else "NO"]
            rows.append((cells, error_colour(l["rel_err"], tol)))
        self._fill(rows)
        findings = doc.get("findings") or []
        self.status.setText(findings[0]["message"] if findings else f"no block exceeds {tol:.0e}")
        highlight = Highlight.of(findings[0]) if findings else None
        if highlight is not None:
            highlight = Highlight(highlight.requested, highlight.related, findings[0]["message"], highlight.severity)
        self.highlight_requested.emit(highlight)

    def _show_kernels(self, doc: dict) -> None:
        rows = []
        for k in doc.get("kernels", []):
            cells = [k["name"], f"{k.get('implementation') or ''} {k['dtype']}",
                     "-" if k["max_rel_err"] is None else f"{k['max_rel_err']:.2e}",
                     "-" if k["max_abs_err"] is None else f"{k['max_abs_err']:.2e}",
                     k.get("verdict") or ("yes" if k["ok"] else "NO")]
            rows.append((cells, error_colour(k["max_rel_err"], k["tolerance"])))
        self._fill(rows)
        findings = doc.get("findings") or []
        self.status.setText(f"all {len(doc.get('kernels', []))} kernels pass on {doc.get('device')}" if doc.get("ok")
                            else "; ".join(f["message"] for f in findings) or "the kernel check failed")
