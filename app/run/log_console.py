"""The engine's output, live: severities coloured, searchable, saved with the session."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from bringup.core.startup_log import line_severity

COLOURS = {"error": "#C62828", "warning": "#A35C00", "info": "#2E3440"}
MAX_LINES = 20000


class LogConsole(QWidget):
    diagnose_requested = Signal(str)  # the whole log, for the diagnosis

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lines: list[str] = []
        self.counts = {"error": 0, "warning": 0, "info": 0}
        self.view = QPlainTextEdit(readOnly=True)
        self.view.setMaximumBlockCount(MAX_LINES)
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.view.setStyleSheet("font-family: monospace; font-size: 9pt;")
        self.search = QLineEdit(placeholderText="Find in log (Enter: next)")
        self.search.returnPressed.connect(self.find_next)
        self.summary = QLabel()
        diagnose = QPushButton("Diagnose log")
        diagnose.setToolTip("Explain the errors in this log and show the failing layer on the map")
        diagnose.clicked.connect(lambda: self.diagnose_requested.emit(self.text()))
        bar = QHBoxLayout()
        bar.addWidget(self.search, 1)
        bar.addWidget(self.summary)
        bar.addWidget(diagnose)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.view)
        self._update_summary()

    def append(self, line: str) -> None:
        severity = line_severity(line)
        self.counts[severity] += 1
        self.lines.append(line)
        if len(self.lines) > MAX_LINES:
            del self.lines[: len(self.lines) - MAX_LINES]
        self.view.appendHtml(f"<span style='color:{COLOURS[severity]}; white-space:pre'>{html.escape(line)}</span>")
        if severity != "info":
            self._update_summary()

    def clear(self) -> None:
        self.lines.clear()
        self.counts = {"error": 0, "warning": 0, "info": 0}
        self.view.clear()
        self._update_summary()

    def text(self) -> str:
        return "\n".join(self.lines)

    def find_next(self) -> bool:
        needle = self.search.text()
        if not needle:
            return False
        if self.view.find(needle):
            return True
        cursor = self.view.textCursor()  # wrap around to the top
        cursor.movePosition(cursor.MoveOperation.Start)
        self.view.setTextCursor(cursor)
        return self.view.find(needle, QTextDocument.FindFlag(0))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.text() + "\n", encoding="utf-8")
        return path

    def _update_summary(self) -> None:
        e, w = self.counts["error"], self.counts["warning"]
        self.summary.setText(f"<span style='color:{COLOURS['error']}'>{e} errors</span> · "
                             f"<span style='color:{COLOURS['warning']}'>{w} warnings</span>")
