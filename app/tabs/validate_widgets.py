"""Pieces of the Validate tab: the probe checklist, the resolved settings, the launch command."""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

# Probe verdicts (core/probe/child.py) -> (colour, glyph). "absent" is not a fault: the machine
# simply lacks it; "crashed" and "timeout" are the parent's words for a child that died or hung.
VERDICTS = {
    "ok": ("#2e9d5b", "\u2713"),
    "absent": ("#8a8f98", "\u2013"),
    "skipped": ("#8a8f98", "\u2192"),
    "warning": ("#C77700", "!"),
    "failed": ("#D62828", "\u2715"),
    "crashed": ("#D62828", "\u2620"),
    "timeout": ("#D62828", "\u231b"),
    "running": ("#2F6DB5", "\u2026"),
}
FAULTS = ("failed", "crashed", "timeout")

def mono_font() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


class ProbeChecklist(QWidget):
    """What this machine has, as a checklist of probe steps grouped into libraries and devices:
    a verdict glyph, the step, and what it found."""

    reprobe_requested = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.status = QLabel("Not probed yet.")
        self.status.setWordWrap(True)
        self.button = QPushButton("Probe again")
        self.button.setToolTip("Run the device probe again (in a child process)")
        self.button.clicked.connect(self.reprobe_requested)
        self.copy_button = QPushButton("Copy report")
        self.copy_button.setToolTip("The whole probe report as JSON, for a bug report")
        self.copy_button.setEnabled(False)
        self.copy_button.clicked.connect(self._copy_report)
        self.report_json = ""
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Step", "Result"])
        self.tree.setUniformRowHeights(True)
        self.tree.setIndentation(12)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        header = self.tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self._groups: dict[str, QTreeWidgetItem] = {}
        top = QHBoxLayout()
        top.addWidget(self.status, 1)
        top.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignTop)
        top.addWidget(self.button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.tree)

    def set_running(self, text: str = "Probing devices in a child process\u2026") -> None:
        self.tree.clear()
        self._groups.clear()
        self.status.setText(text)
        self.status.setStyleSheet("")
        self.button.setEnabled(False)

    def add_step(self, group: str, name: str, verdict: str, detail: str, title: str = "") -> None:
        """One row under its group ("Libraries", "Devices"): the step's short name, its verdict glyph
        and what it found; `title` (what the step does) is the tooltip."""
        parent = self._groups.get(group)
        if parent is None:
            parent = QTreeWidgetItem([group, ""])
            font = parent.font(0)
            font.setBold(True)
            parent.setFont(0, font)
            parent.setFirstColumnSpanned(True)
            self.tree.addTopLevelItem(parent)
            parent.setExpanded(True)
            self._groups[group] = parent
        colour, glyph = VERDICTS.get(verdict, VERDICTS["warning"])
        item = QTreeWidgetItem([f"{glyph}  {name}", detail])
        item.setForeground(0, QBrush(QColor(colour)))
        item.setToolTip(0, f"{title or name}: {verdict}")
        item.setToolTip(1, detail)
        if verdict in FAULTS:
            font = item.font(1)
            font.setBold(True)
            item.setFont(1, font)
            item.setForeground(1, QBrush(QColor(colour)))
        elif verdict in ("absent", "skipped"):
            item.setForeground(1, QBrush(QColor("#8a8f98")))
        parent.addChild(item)

    def set_steps(self, steps: list[tuple], status: str, ok: bool = True) -> None:
        """steps: (group, name, verdict, detail[, title]) with verdict one of VERDICTS."""
        self.tree.clear()
        self._groups.clear()
        for step in steps:
            self.add_step(*step)
        self.set_status(status, ok)

    def set_status(self, status: str, ok: bool = True) -> None:
        self.status.setText(status)
        self.status.setStyleSheet("" if ok else f"color: {VERDICTS['failed'][0]}; font-weight: 600;")
        self.button.setEnabled(True)

    def set_report_json(self, text: str) -> None:
        self.report_json = text
        self.copy_button.setEnabled(bool(text))

    def _copy_report(self) -> None:
        QGuiApplication.clipboard().setText(self.report_json)

    def steps(self) -> list[tuple[str, str]]:
        """(row text, verdict tooltip) of every step row, for tests."""
        rows = []
        for i in range(self.tree.topLevelItemCount()):
            group = self.tree.topLevelItem(i)
            for j in range(group.childCount()):
                rows.append((group.child(j).text(0), group.child(j).toolTip(0)))
        return rows


class ResolvedTable(QTableWidget):
    """The settings after the target's own auto-resolution, and why; values the target chose in bold."""

    def __init__(self, parent=None) -> None:
        super().__init__(0, 3, parent)
        self.setHorizontalHeaderLabels(["Setting", "Resolved", "Why"])
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(22)
        header = self.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)

    def set_resolved(self, resolved, requested: dict | None = None) -> None:
        """`resolved`: the target's `Resolved` settings (None: none); `requested`: the form's values."""
        requested = requested or {}
        self.setRowCount(0)
        if resolved is None:
            return
        values = dataclasses.asdict(resolved)
        why = values.pop("why", None) or {}
        for key, value in values.items():
            row = self.rowCount()
            self.insertRow(row)
            shown = "\u2014" if value is None else str(value)
            item = QTableWidgetItem(shown)
            asked = requested.get(key)
            chosen = bool(why.get(key)) or (asked in (None, "auto") and key in requested and value not in (None, "auto"))
            if chosen:  # the target decided this one
                font = item.font()
                font.setBold(True)
                item.setFont(font)
            reason = QTableWidgetItem(str(why.get(key) or ""))
            reason.setForeground(QBrush(QColor("#6b7280")))
            reason.setToolTip(str(why.get(key) or ""))
            self.setItem(row, 0, QTableWidgetItem(str(key)))
            self.setItem(row, 1, item)
            self.setItem(row, 2, reason)

    def value(self, key: str) -> str | None:
        for row in range(self.rowCount()):
            if self.item(row, 0).text() == key:
                return self.item(row, 1).text()
        return None


class LaunchCommand(QWidget):
    """The exact launch command line, read-only and monospaced, with a Copy button."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setFont(mono_font())
        self.text.setFixedHeight(self.text.fontMetrics().lineSpacing() * 2 + 14)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the command line to the clipboard")
        self.copy_button.clicked.connect(self.copy)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignTop)

    def set_command(self, command: str) -> None:
        self.text.setPlainText(command)
        self.copy_button.setEnabled(bool(command))
        self.copy_button.setText("Copy")

    def command(self) -> str:
        return self.text.toPlainText()

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.command())
        self.copy_button.setText("Copied")
