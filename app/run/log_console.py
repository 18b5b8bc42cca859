"""The engine's output, live: severities coloured, searchable, saved with the session."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from bringup.core.client.startup_log import line_severity

COLOURS = {"error": "#C62828", "warning": "#A35C00", "info": "#2E3440"}
MAX_LINES = 20000


class _LineClicks(QObject):
    """A plain click (no selection made) on the log reports the 1-based line under the mouse."""

    def __init__(self, console: "LogConsole") -> None:
        super().__init__(console)
        self.console = console

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt)
        if event.type() == QEvent.Type.MouseButtonRelease and event.button() == Qt.MouseButton.LeftButton:
            view = self.console.view
            if not view.textCursor().hasSelection():
                block = view.cursorForPosition(event.position().toPoint()).blockNumber()
                self.console.line_clicked.emit(block + 1)
        return False


class LogConsole(QWidget):
    diagnose_requested = Signal(str)  # the whole log, for the diagnosis
    line_clicked = Signal(int)  # 1-based line number: the Run tab explains the finding it belongs to

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lines: list[str] = []
        self.counts = {"error": 0, "warning": 0, "info": 0}
        self.view = QPlainTextEdit(readOnly=True)
        self.view.setMaximumBlockCount(MAX_LINES)
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.view.setStyleSheet("font-family: monospace; font-size: 9pt;")
        self.view.setToolTip("Click an error line to see what it means and the layer it names")
        self._clicks = _LineClicks(self)
        self.view.viewport().installEventFilter(self._clicks)
        self.explanation = QLabel(wordWrap=True, textFormat=Qt.TextFormat.RichText)
        self.explanation.setVisible(False)
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
        layout.addWidget(self.explanation)
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

    def show_explanation(self, rich_text: str, severity: str = "error") -> None:
        """The finding a clicked line belongs to, under the log ("" hides it)."""
        colour = COLOURS.get(severity, COLOURS["info"])
        self.explanation.setText(rich_text)
        self.explanation.setStyleSheet(f"border-left: 3px solid {colour}; padding: 4px 8px; background: #F6F7F9;")
        self.explanation.setVisible(bool(rich_text))

    def clear(self) -> None:
        self.show_explanation("")
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
