"""The Numerics tab's page: compare each block with the reference, and check every kernel.

Both run `bringup compare --json` / `bringup check-kernels --json` as child processes, waited on from
a plain thread (the window never imports torch and never freezes); results come back through queued
signals. "Compare dump" compares the folder an SGLang server dumped its layers into
(`--debug-tensor-dump-output-folder`, offered by the Run tab) the same way. The comparison's table and
the layer map itself are coloured by relative error against the tolerance (a Highlight carrying every
block's error), and its finding (the first block beyond tolerance) is marked on the map.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPushButton, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from bringup.app.layermap.highlight import Highlight
from bringup.app.layermap.style import error_colour
from bringup.core.numerics.kernel_rows import row_label


class CommandRunner(QObject):
    """Runs one `bringup SUBCOMMAND ... --json` child at a time; `finished(kind, document or error text)`.
    It is free again by the time `finished` reaches its listeners (on the GUI thread), so a listener,
    or a click the moment the result shows, can start the next one."""

    finished = Signal(str, object)
    _result = Signal(str, object)  # from the worker thread, queued onto the GUI thread

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._busy = False
        self._result.connect(self._deliver)

    @property
    def running(self) -> bool:
        return self._busy

    def start(self, kind: str, argv: list[str]) -> bool:
        if self._busy:
            return False
        self._busy = True
        threading.Thread(target=self._run, args=(kind, argv), name=f"numerics-{kind}", daemon=True).start()
        return True

    def _run(self, kind: str, argv: list[str]) -> None:
        proc = subprocess.run([sys.executable, "-m", "bringup", *argv, "--json"], capture_output=True, text=True)
        try:
            result: object = json.loads(proc.stdout)
        except json.JSONDecodeError:
            result = (proc.stderr.strip().splitlines() or [f"bringup {argv[0]} exited with code {proc.returncode}"])[-1]
        try:
            self._result.emit(kind, result)
        except RuntimeError:  # the panel is gone (window closed)
            pass

    def _deliver(self, kind: str, result) -> None:
        self._busy = False
        self.finished.emit(kind, result)


def compare_highlight(doc: dict) -> Highlight:
    """The map's view of a comparison: every block's error (the cells' colours) and the first finding's marks."""
    findings = doc.get("findings") or []
    tol = doc.get("tolerance")
    base = Highlight.of(findings[0]) if findings else None
    message = findings[0]["message"] if findings else f"no block exceeds {tol:.0e}" if tol else ""
    return Highlight(requested=base.requested if base else [], related=base.related if base else [], message=message,
                     severity=base.severity if base else "info",
                     errors=tuple((l["index"], l["rel_err"]) for l in doc.get("layers", [])), tolerance=tol)


def kernel_count_text(doc: dict) -> str:
    """What a passing check proves: device kernels apart from ops that run the reference itself there."""
    rows = doc.get("kernels") or []
    reference = sum(1 for k in rows if k.get("implementation") == "reference")
    device = len(rows) - reference
    text = f"{device} device kernel{'s' if device != 1 else ''} pass on {doc.get('device')}"
    if reference:
        text += (f"; {reference} more row{'s' if reference != 1 else ''} (grey) run the plain reference there: no "
                 "device kernel yet, so they are compared with themselves")
    return text


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
        self.dump_folder = QLineEdit()
        self.dump_folder.setPlaceholderText("SGLang dump folder")
        self.dump_folder.setToolTip("The folder an SGLang server wrote with --debug-tensor-dump-output-folder (Run tab: "
                                    "'Dump layers'); its first full prefill is compared with the reference, which must "
                                    "be the checkpoint the server loaded")
        self.browse_button = QPushButton("Browse…")
        self.browse_button.clicked.connect(self._browse_dump)
        self.dump_button = QPushButton("Compare dump")
        self.dump_button.setToolTip("the dump's blocks against the float32 CPU reference on the same tokens")
        self.last_compare: dict | None = None  # for the session report
        self.last_kernels: dict | None = None
        self.status = QLabel("Compare each block's output with the float32 CPU reference, or check every kernel.")
        self.status.setWordWrap(True)
        self.table = QTableWidget(0, 6)
        self.table.setHorizontalHeaderLabels(["block / kernel", "kind", "rel err", "max abs", "ok", "flips"])
        self.table.horizontalHeaderItem(5).setToolTip("MoE blocks: tokens whose experts differ from the reference's own "
                                                      "choice (the reference follows the device's)")
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # kernel names are long: they get the room
        for column in range(1, 6):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        layout = QVBoxLayout(self)
        for widgets in ((QLabel("Device"), self.device), (self.compare_button, self.kernels_button),
                        (self.dump_folder, self.browse_button), (self.dump_button,)):
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
        self.dump_button.clicked.connect(self.compare_dump)
        self._buttons = (self.compare_button, self.kernels_button, self.dump_button)

    def set_layer_map(self, layer_map) -> None:
        self.source = getattr(layer_map, "source", None) if layer_map is not None else None

    def start(self, kind: str, extra: list[str] | None = None) -> bool:
        argv = [kind, self.source or "default", "--device", self.device.text().strip() or "cpu", *(extra or [])]
        return self._start(kind, argv)

    def compare_dump(self, folder: str | None = None) -> bool:
        """Compare an SGLang dump folder (the field's, or `folder`) with the reference."""
        folder = (folder or self.dump_folder.text()).strip()
        if not folder:
            self.status.setText("Give the folder SGLang dumped its layers into (--debug-tensor-dump-output-folder).")
            return False
        self.dump_folder.setText(folder)
        return self._start("compare", ["compare", self.source or "default", "--sglang-dump", folder])

    def _browse_dump(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "SGLang dump folder", self.dump_folder.text())
        if folder:
            self.dump_folder.setText(folder)

    def _start(self, kind: str, argv: list[str]) -> bool:
        if not self.runner.start(kind, argv):
            return False
        for b in self._buttons:
            b.setEnabled(False)
        self.status.setText(f"running bringup {' '.join(argv)} ...")
        return True

    def report_section(self) -> dict:
        """For the session report: the last comparison and kernel check, as their JSON documents."""
        return {"numerics": {k: v for k, v in (("compare", self.last_compare), ("kernels", self.last_kernels))
                             if v is not None}}

    def _done(self, kind: str, result) -> None:
        for b in self._buttons:
            b.setEnabled(True)
        if isinstance(result, str):
            self.status.setText(f"{kind} failed: {result}")
        elif kind == "compare":
            self.last_compare = result
            self._show_compare(result)
        else:
            self.last_kernels = result
            self._show_kernels(result)
        (self.compare_finished if kind == "compare" else self.kernels_finished).emit(result)

    def _fill(self, rows, muted: set[int] = frozenset()) -> None:
        """`muted`: rows shown in grey (a reference run on the device: compared with itself)."""
        self.table.setRowCount(len(rows))
        for r, (cells, colour) in enumerate(rows):
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 2 and colour is not None and r not in muted:
                    item.setBackground(colour)
                if r in muted:
                    item.setForeground(QColor("#8a8f98"))
                    item.setToolTip("No device kernel for this op yet: the device runs the plain reference, so this "
                                    "row compares the reference with itself and proves nothing about the device")
                self.table.setItem(r, c, item)

    def _show_compare(self, doc: dict) -> None:
        tol = doc.get("tolerance")
        rows = []
        for l in doc.get("layers", []):
            rel = l["rel_err"]
            cells = [str(l["index"]), l["mixer"] if l["mixer"] != "none" else l["ffn"],
                     "-" if rel is None else f"{rel:.2e}",
                     "-" if l["max_abs_err"] is None else f"{l['max_abs_err']:.2e}",
                     "not in the dump" if rel is None else "yes" if rel <= tol else "NO",
                     "" if l.get("routing_flips") is None else str(l["routing_flips"])]
            rows.append((cells, error_colour(rel, tol)))
        self._fill(rows)
        findings = doc.get("findings") or []
        where = f"{doc['device']}: " if doc.get("source_file") else ""
        said = [f["message"] for f in findings]
        if doc.get("first_divergent_layer") is None:
            said.insert(0, f"no block exceeds {tol:.0e}")
        self.status.setText(where + "  ·  ".join(said))
        self.highlight_requested.emit(compare_highlight(doc))

    def _show_kernels(self, doc: dict) -> None:
        rows, muted = [], set()
        for i, k in enumerate(doc.get("kernels", [])):
            if k.get("implementation") == "reference":
                muted.add(i)
            cells = [row_label(k), f"{k.get('implementation') or ''} {k['dtype']}",
                     "-" if k["max_rel_err"] is None else f"{k['max_rel_err']:.2e}",
                     "-" if k["max_abs_err"] is None else f"{k['max_abs_err']:.2e}",
                     k.get("verdict") or ("yes" if k["ok"] else "NO")]
            # A kernel that crashed or hung has no error to show: red, as one beyond tolerance.
            rel = k["max_rel_err"] if k["max_rel_err"] is not None else float("nan")
            rows.append((cells + [""], error_colour(rel, k["tolerance"] if k["tolerance"] is not None else 0.0)))
        self._fill(rows, muted)
        findings = doc.get("findings") or []
        self.status.setText(kernel_count_text(doc) if doc.get("ok")
                            else "; ".join(f["message"] for f in findings) or "the kernel check failed")
