"""Pieces of the Validate tab: probe checklist, compatibility grid, resolved settings, launch command."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontDatabase, QGuiApplication, QPainter, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QToolTip,
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


class CompatMatrixView(QWidget):
    """The compatibility matrix as colour grids, one block per device: mamba strategy rows,
    attention backend columns, each cell ok / warning / failure. Blocks flow and wrap to the width.

    Hover a cell for its codes and the engine's first complaint; click it to try those settings
    (`cell_chosen(dict)`). The cell of the current settings is outlined.
    """

    cell_chosen = Signal(dict)
    CELL_W, CELL_H, LABEL_W, TITLE_H, HEAD_H, GAP = 62, 22, 112, 22, 20, 18

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.matrix: dict | None = None
        self.current: tuple | None = None  # (device, strategy, backend)
        self._rects: list[tuple] = []  # (QRectF, cell dict)
        self._hover: dict | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_matrix(self, matrix: dict | None, current: tuple | None = None) -> None:
        self.matrix = matrix
        self.current = current
        self._relayout()

    def cells(self) -> list[dict]:
        return list((self.matrix or {}).get("cells") or [])

    def rect_of(self, device: str, strategy: str, backend: str) -> QRectF | None:
        for rect, cell in self._rects:
            if (cell["device"], cell["strategy"], cell["backend"]) == (device, strategy, backend):
                return rect
        return None

    def device_order(self) -> list[str]:
        """The current settings' device first: that is the block people look at."""
        devices = list(self.matrix["devices"])
        if self.current and self.current[0] in devices:
            devices.remove(self.current[0])
            devices.insert(0, self.current[0])
        return devices

    def _block_size(self, device: str) -> tuple[float, float]:
        columns = len(self.matrix["backends"][device])
        rows = len(self.matrix["strategies"])
        return self.LABEL_W + columns * self.CELL_W, self.TITLE_H + self.HEAD_H + rows * self.CELL_H

    def _origins(self, width: float) -> dict[str, tuple[float, float]]:
        """Top-left of each device block, flowing left to right and wrapping."""
        origins, x, y, row_h = {}, 0.0, 0.0, 0.0
        for device in self.device_order():
            w, h = self._block_size(device)
            if x > 0 and x + w > width:
                x, y, row_h = 0.0, y + row_h + self.GAP, 0.0
            origins[device] = (x, y)
            x += w + self.GAP
            row_h = max(row_h, h)
        return origins

    def _relayout(self) -> None:
        self._rects = []
        if not self.matrix:
            self.setFixedHeight(40)
            self.update()
            return
        origins = self._origins(max(200, self.width()))
        by_key = {(c["device"], c["strategy"], c["backend"]): c for c in self.cells()}
        bottom = 0.0
        for device, (x, y) in origins.items():
            for r, strategy in enumerate(self.matrix["strategies"]):
                for k, backend in enumerate(self.matrix["backends"][device]):
                    cell = by_key.get((device, strategy, backend))
                    if cell is None:
                        continue
                    rect = QRectF(x + self.LABEL_W + k * self.CELL_W, y + self.TITLE_H + self.HEAD_H + r * self.CELL_H,
                                  self.CELL_W - 2, self.CELL_H - 2)
                    self._rects.append((rect, cell))
            bottom = max(bottom, y + self._block_size(device)[1])
        self.setFixedHeight(int(bottom) + 4)
        self.update()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._relayout()

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        text = self.palette().text().color()
        muted = QColor("#6b7280")
        if not self.matrix:
            painter.setPen(muted)
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "Load a model to see its compatibility matrix.")
            return
        font = QFont(self.font())
        small = QFont(font)
        small.setPointSizeF(max(7.0, font.pointSizeF() * 0.85))
        bold = QFont(font)
        bold.setBold(True)
        for device, (x, y) in self._origins(max(200, self.width())).items():
            painter.setFont(bold)
            painter.setPen(text)
            painter.drawText(QRectF(x, y, 300, self.TITLE_H), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             device)
            painter.setFont(small)
            painter.setPen(muted)
            for k, backend in enumerate(self.matrix["backends"][device]):
                rect = QRectF(x + self.LABEL_W + k * self.CELL_W, y + self.TITLE_H, self.CELL_W - 2, self.HEAD_H)
                label = painter.fontMetrics().elidedText(backend, Qt.TextElideMode.ElideRight, int(rect.width()))
                painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, label)
            for r, strategy in enumerate(self.matrix["strategies"]):
                rect = QRectF(x, y + self.TITLE_H + self.HEAD_H + r * self.CELL_H, self.LABEL_W - 6, self.CELL_H)
                label = "radix cache off" if strategy == "disabled" else strategy
                painter.drawText(rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, label)
        painter.setFont(bold)
        for rect, cell in self._rects:
            verdict = cell.get("verdict", "")
            painter.setPen(Qt.PenStyle.NoPen)
            fill = QColor(CELL_COLOURS.get(verdict, "#e5e7eb"))
            if cell is self._hover:
                fill = fill.darker(108)
            painter.setBrush(fill)
            painter.drawRoundedRect(rect, 3, 3)
            painter.setPen(QColor(CELL_TEXT.get(verdict, "#374151")))
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, severity_style("ok" if verdict == "ok" else verdict)[1])
            if self.current == (cell["device"], cell["strategy"], cell["backend"]):
                painter.setPen(QPen(QColor("#1F2A44"), 2))
                painter.setBrush(Qt.BrushStyle.NoBrush)
                painter.drawRoundedRect(rect.adjusted(-1, -1, 1, 1), 4, 4)

    def _cell_at(self, pos) -> dict | None:
        for rect, cell in self._rects:
            if rect.contains(pos):
                return cell
        return None

    def mouseMoveEvent(self, event) -> None:
        cell = self._cell_at(event.position())
        if cell is not self._hover:
            self._hover = cell
            self.update()
        if cell is None:
            QToolTip.hideText()
            return
        backend = cell["backend"] if cell["backend"] != "default" else f"default ({cell.get('resolved_backend')})"
        lines = [f"{cell['device']} \u00b7 {cell['strategy']} \u00b7 {backend}: {cell['verdict']}"]
        if cell.get("resolved_strategy"):
            lines.append(f"strategy resolves to {cell['resolved_strategy']}")
        if cell.get("codes"):
            lines.append(", ".join(cell["codes"]))
        if cell.get("summary"):
            lines.append(cell["summary"])
        lines.append("Click to try these settings.")
        QToolTip.showText(event.globalPosition().toPoint(), "\n".join(lines), self)

    def leaveEvent(self, event) -> None:
        self._hover = None
        self.update()

    def mousePressEvent(self, event) -> None:
        cell = self._cell_at(event.position())
        if cell is not None and event.button() == Qt.MouseButton.LeftButton:
            self.cell_chosen.emit(cell)


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

    def set_resolved(self, resolved: dict, requested: dict | None = None, why: dict | None = None) -> None:
        requested = requested or {}
        why = why or {}
        self.setRowCount(0)
        for key, value in resolved.items():
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
