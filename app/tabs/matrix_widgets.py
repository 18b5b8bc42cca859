"""The compatibility matrix as colour grids: one block per device, mamba strategy rows, attention
backend columns, each cell ok / warning / failure (from `bringup.core.validate.matrix`)."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from .findings_widgets import severity_style

# Compatibility verdicts -> colour of the cell.
CELL_COLOURS = {"ok": "#cfeedd", "warning": "#fbe3b8", "failure": "#f6c6c6", "error": "#f6c6c6"}
CELL_TEXT = {"ok": "#1f6b40", "warning": "#8a5a12", "failure": "#a12626", "error": "#a12626"}


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
