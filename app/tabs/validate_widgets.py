"""Pieces of the Validate tab: probe checklist, compatibility grid, resolved settings, launch command."""

from __future__ import annotations

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

from .findings_widgets import severity_style

# Probe verdicts (core/probe_child.py) -> (colour, glyph). "absent" is not a fault: the machine
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
# Compatibility verdicts -> colour of the cell.
CELL_COLOURS = {"ok": "#cfeedd", "warning": "#fbe3b8", "failure": "#f6c6c6", "error": "#f6c6c6"}
CELL_TEXT = {"ok": "#1f6b40", "warning": "#8a5a12", "failure": "#a12626", "error": "#a12626"}


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
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Step", "Result"])
        self.tree.setUniformRowHeights(True)
        self.tree.setIndentation(12)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        header = self.tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(0, 190)
        header.setStretchLastSection(True)
        self._groups: dict[str, QTreeWidgetItem] = {}
        top = QHBoxLayout()
        top.addWidget(self.status, 1)
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

    def add_step(self, group: str, name: str, verdict: str, detail: str) -> None:
        """One row under its group ("Libraries", "Devices"), as the probe reports it."""
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
        item.setToolTip(0, f"{name}: {verdict}")
        item.setToolTip(1, detail)
        if verdict in FAULTS:
            font = item.font(1)
            font.setBold(True)
            item.setFont(1, font)
            item.setForeground(1, QBrush(QColor(colour)))
        elif verdict in ("absent", "skipped"):
            item.setForeground(1, QBrush(QColor("#8a8f98")))
        parent.addChild(item)

    def set_steps(self, steps: list[tuple[str, str, str, str]], status: str, ok: bool = True) -> None:
        """steps: (group, name, verdict, detail) with verdict one of VERDICTS."""
        self.tree.clear()
        self._groups.clear()
        for step in steps:
            self.add_step(*step)
        self.set_status(status, ok)

    def set_status(self, status: str, ok: bool = True) -> None:
        self.status.setText(status)
        self.status.setStyleSheet("" if ok else f"color: {VERDICTS['failed'][0]}; font-weight: 600;")
        self.button.setEnabled(True)

    def steps(self) -> list[tuple[str, str]]:
        """(row text, verdict tooltip) of every step row, for tests."""
        rows = []
        for i in range(self.tree.topLevelItemCount()):
            group = self.tree.topLevelItem(i)
            for j in range(group.childCount()):
                rows.append((group.child(j).text(0), group.child(j).toolTip(0)))
        return rows


class CompatGrid(QTableWidget):
    """Device x strategy rows, attention backend columns, each cell ok / warning / failure.

    Clicking a cell emits `cell_chosen(dict)` with that cell's settings so the form can try them.
    """

    cell_chosen = Signal(dict)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().setDefaultSectionSize(22)
        self.horizontalHeader().setDefaultSectionSize(74)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.setShowGrid(True)
        self.setStyleSheet("QTableWidget { gridline-color: #ffffff; }")
        self.cellClicked.connect(self._clicked)
        self._cells: dict[tuple[int, int], dict] = {}

    def set_cells(self, cells: list[dict], row_keys=("device", "strategy"), col_key="backend",
                  current: dict | None = None) -> None:
        """cells: dicts with the row keys, the column key, `verdict`, and optional `reason`/`codes`."""
        rows: list[tuple] = []
        cols: list = []
        for cell in cells:
            row = tuple(cell.get(k) for k in row_keys)
            if row not in rows:
                rows.append(row)
            if cell.get(col_key) not in cols:
                cols.append(cell.get(col_key))
        self.clear()
        self._cells.clear()
        self.setRowCount(len(rows))
        self.setColumnCount(len(cols))
        self.setHorizontalHeaderLabels([str(c) for c in cols])
        self.setVerticalHeaderLabels(["  \u00b7  ".join(str(v) for v in row) for row in rows])
        for cell in cells:
            r = rows.index(tuple(cell.get(k) for k in row_keys))
            c = cols.index(cell.get(col_key))
            verdict = str(cell.get("verdict") or "").lower()
            glyph = severity_style("ok" if verdict == "ok" else verdict)[1]
            item = QTableWidgetItem(glyph)
            item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            item.setBackground(QBrush(QColor(CELL_COLOURS.get(verdict, "#e5e7eb"))))
            item.setForeground(QBrush(QColor(CELL_TEXT.get(verdict, "#374151"))))
            reason = cell.get("reason") or ", ".join(cell.get("codes") or [])
            where = ", ".join(f"{k}={cell.get(k)}" for k in (*row_keys, col_key))
            item.setToolTip(f"{where}\n{verdict}{': ' + reason if reason else ''}")
            if current and all(str(current.get(k)) == str(cell.get(k)) for k in (*row_keys, col_key)):
                font = item.font()
                font.setBold(True)
                item.setFont(font)
                item.setText(f"[{glyph}]")
            self.setItem(r, c, item)
            self._cells[(r, c)] = cell

    def cell_at(self, row: int, col: int) -> dict | None:
        return self._cells.get((row, col))

    def _clicked(self, row: int, col: int) -> None:
        cell = self._cells.get((row, col))
        if cell is not None:
            self.cell_chosen.emit(cell)


class ResolvedTable(QTableWidget):
    """The settings after the target's own auto-resolution; changed values in bold."""

    def __init__(self, parent=None) -> None:
        super().__init__(0, 2, parent)
        self.setHorizontalHeaderLabels(["Setting", "Resolved value"])
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(22)
        self.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setStretchLastSection(True)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setAlternatingRowColors(True)

    def set_resolved(self, resolved: dict, requested: dict | None = None) -> None:
        requested = requested or {}
        self.setRowCount(0)
        for key, value in resolved.items():
            row = self.rowCount()
            self.insertRow(row)
            name = QTableWidgetItem(str(key))
            shown = "\u2014" if value is None else str(value)
            item = QTableWidgetItem(shown)
            asked = requested.get(key, "__absent__")
            if asked != "__absent__" and asked not in (None, "auto") and str(asked) != str(value):
                item.setToolTip(f"you asked for {asked}; the target resolves it to {shown}")
            if asked in (None, "auto") and value not in (None, "auto"):
                font = item.font()
                font.setBold(True)
                item.setFont(font)
                item.setToolTip(f"auto-resolved to {shown}")
            self.setItem(row, 0, name)
            self.setItem(row, 1, item)

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
        self.text.setMaximumHeight(62)
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
