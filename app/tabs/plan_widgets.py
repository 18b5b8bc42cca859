"""Pieces of the Plan tab: the stacked memory bar and the capacity figure cards (QPainter only)."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (
                               QAbstractItemView,
                               QFrame,
                               QHeaderView,
                               QLabel,
                               QSizePolicy,
                               QTableWidget,
                               QTableWidgetItem,
                               QVBoxLayout,
                               QWidget,
                               )

from bringup.core.layermap.sizes import format_bytes

GIB = 1 << 30
MIB = 1 << 20


def fmt_count(n) -> str:
    if n is None:
        return "\u2014"
    n = int(n)
    if abs(n) >= 10_000_000:
        return f"{n / 1e6:.1f} M"
    if abs(n) >= 1_000_000:
        return f"{n / 1e6:.2f} M"
    return f"{n:,}"


@dataclass
class Segment:
    label: str
    bytes: float
    colour: str
    note: str = ""  # shown in the legend after the size


class MemoryBar(QWidget):
    """One horizontal bar split into segments, sizes written inside, a legend underneath."""

    BAR_HEIGHT = 46

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.segments: list[Segment] = []
        self.total = 0.0
        self.title = ""
        self.overflow = False  # the segments add up to more than the device holds
        self.device_bytes = 1.0
        self.device_label = "device"
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(self.sizeHint().height())

    def sizeHint(self) -> QSize:
        return QSize(600, self.BAR_HEIGHT + 30 + 2 * 22)

    def set_segments(self, segments: list[Segment], total: float, title: str = "", device_label: str = "device") -> None:
        """`total`: the device's bytes. When the segments need more, the bar is scaled to the need and
        the device's edge is drawn where its memory ends: what lies right of it does not fit."""
        self.segments = [s for s in segments if s.bytes > 0]
        used = sum(s.bytes for s in self.segments)
        self.overflow = used > total * 1.0001
        self.device_bytes = max(float(total), 1.0)
        self.device_label = device_label
        self.total = max(float(total), used, 1.0)
        self.title = title
        self._fit_height()
        self.update()

    def _legend(self, width: float) -> tuple[list[str], int, float]:
        """Legend texts, how many columns fit in `width`, and the column width."""
        fm = self.fontMetrics()
        texts = []
        for seg in self.segments:
            share = 100.0 * seg.bytes / self.device_bytes  # of the device, so weights that overflow read > 100 %
            text = f"{seg.label}  {format_bytes(seg.bytes, short=True)}  ({share:.0f}% of the device)"
            texts.append(text + (f"  \u00b7  {seg.note}" if seg.note else ""))
        widest = max((fm.horizontalAdvance(t) for t in texts), default=100) + 40
        columns = max(1, min(len(texts) or 1, int(width // widest)))
        return texts, columns, width / columns

    def _fit_height(self) -> None:
        texts, columns, _ = self._legend(self.width() - 2)
        rows = max(1, -(-len(texts) // columns))
        self.setFixedHeight(22 + self.BAR_HEIGHT + 8 + rows * 22 + 4)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_height()

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        font = QFont(self.font())
        width = self.width() - 2
        top = 22
        # Title line.
        bold = QFont(font)
        bold.setBold(True)
        painter.setFont(bold)
        painter.setPen(self.palette().text().color())
        painter.drawText(QRectF(1, 0, width, 18), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.title)
        bar = QRectF(1, top, width, self.BAR_HEIGHT)
        clip = QPainterPath()
        clip.addRoundedRect(bar, 8, 8)
        painter.save()
        painter.setClipPath(clip)
        painter.fillRect(bar, QColor("#eceef1"))
        x = bar.left()
        painter.setFont(font)
        for seg in self.segments:
            w = bar.width() * seg.bytes / self.total
            rect = QRectF(x, bar.top(), w, bar.height())
            painter.fillRect(rect, QColor(seg.colour))
            text = f"{seg.label}\n{format_bytes(seg.bytes, short=True)}"
            fm = painter.fontMetrics()
            if w > max(fm.horizontalAdvance(seg.label), fm.horizontalAdvance(format_bytes(seg.bytes, short=True))) + 10:
                painter.setPen(QColor("white") if _is_dark(seg.colour) else QColor("#222"))
                painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
            x += w
        if self.overflow:  # past the device's edge: hatched, it does not fit
            edge = bar.left() + bar.width() * self.device_bytes / self.total
            painter.fillRect(QRectF(edge, bar.top(), bar.right() - edge, bar.height()),
                             QBrush(QColor(198, 40, 40, 150), Qt.BrushStyle.BDiagPattern))
        painter.restore()
        painter.setPen(QPen(QColor("#b8bcc4"), 1))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(bar, 8, 8)
        if self.overflow:
            edge = bar.left() + bar.width() * self.device_bytes / self.total
            painter.setPen(QPen(QColor("#c62828"), 3))
            painter.drawLine(int(edge), int(bar.top()) - 4, int(edge), int(bar.bottom()) + 4)
            label = f"\u25c0 {self.device_label} ends here ({format_bytes(self.device_bytes, short=True)})"
            painter.setFont(font)
            painter.drawText(QRectF(edge + 6, bar.bottom() - 16, bar.right() - edge - 8, 16),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label)
        # Legend: swatch, label, size, share and note, in as many columns as fit.
        painter.setFont(font)
        texts, columns, col_w = self._legend(width)
        for i, (seg, text) in enumerate(zip(self.segments, texts)):
            row, col = divmod(i, columns)
            lx = 1 + col * col_w
            ly = bar.bottom() + 8 + row * 22
            painter.setPen(QPen(QColor(seg.colour).darker(125), 1))
            painter.setBrush(QColor(seg.colour))
            painter.drawRoundedRect(QRectF(lx + 0.5, ly + 4.5, 12, 12), 3, 3)
            painter.setPen(self.palette().text().color())
            painter.drawText(
                QRectF(lx + 18, ly, col_w - 22, 20),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                painter.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, int(col_w - 22)),
            )
        painter.end()


def _is_dark(colour: str) -> bool:
    c = QColor(colour)
    return (0.299 * c.red() + 0.587 * c.green() + 0.114 * c.blue()) < 160


class FigureCard(QFrame):
    """A big number with a caption and a one-line note, e.g. "KV tokens  3.68 M  (page 1)"."""

    def __init__(self, caption: str, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("figureCard")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet(
            "#figureCard { background: palette(base); border: 1px solid #d5d8de; border-radius: 8px; }"
        )
        self.caption = QLabel(caption)
        self.caption.setStyleSheet("color: #6b7280; font-size: 9pt;")
        self.value = QLabel("\u2014")
        self.value.setStyleSheet("font-size: 20pt; font-weight: 600;")
        self.note = QLabel("")
        self.note.setStyleSheet("color: #6b7280; font-size: 9pt;")
        self.note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(2)
        layout.addWidget(self.caption)
        layout.addWidget(self.value)
        layout.addWidget(self.note)
        layout.addStretch(1)

    def set(self, value: str, note: str = "", accent: str | None = None) -> None:
        self.value.setText(value)
        self.note.setText(note)
        colour = f"color: {accent};" if accent else ""
        self.value.setStyleSheet(f"font-size: 20pt; font-weight: 600; {colour}")
        border = accent or "#d5d8de"
        width = 2 if accent else 1
        self.setStyleSheet(
            f"#figureCard {{ background: palette(base); border: {width}px solid {border}; border-radius: 8px; }}"
        )


class StageTable(QTableWidget):
    """One row per pipeline stage: its layers, what its pools hold, and the busiest stage marked."""

    HEADERS = ["Stage", "Layers", "KV layers", "State layers", "Weights", "KV tokens", "State slots"]

    def __init__(self, parent=None) -> None:
        super().__init__(0, len(self.HEADERS), parent)
        self.setHorizontalHeaderLabels(self.HEADERS)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(22)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.stages: list = []  # StagePlan

    def set_stages(self, stages: list, busiest: int | None = None) -> None:
        self.stages = list(stages)
        self.setRowCount(0)
        for stage in self.stages:
            row = self.rowCount()
            self.insertRow(row)
            first, last = stage.layers
            kv_tokens = stage.kv_tokens
            cells = [str(stage.stage), f"{first}\u2013{last}", str(stage.kv_layers), str(stage.state_layers),
                     format_bytes(stage.weights_bytes, short=True), "no KV layer" if kv_tokens is None else fmt_count(kv_tokens),
                     fmt_count(stage.state_slots)]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                if stage.stage == busiest:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                    item.setToolTip("the busiest stage: the figures above are this stage's")
                if col == 5 and kv_tokens is None:
                    item.setForeground(QColor("#C77700"))
                    item.setToolTip("this stage holds no attention layer: no token limit of its own "
                                    "(SGLang takes the minimum over the other stages)")
                self.setItem(row, col, item)
        self.setFixedHeight(self.horizontalHeader().height() + 22 * max(1, len(self.stages)) + 2 * self.frameWidth() + 2)
