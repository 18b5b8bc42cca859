"""A large arc gauge for demo mode: a pool's fill, readable from the back of the room."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget


class Gauge(QWidget):
    def __init__(self, title: str, colour: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = title
        self.colour = QColor(colour)
        self.fraction: float | None = None  # None: no data
        self.caption = ""
        self.setMinimumSize(220, 200)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_value(self, fraction: float | None, caption: str = "") -> None:
        self.fraction = None if fraction is None else max(0.0, min(1.0, fraction))
        self.caption = caption
        self.update()

    def paintEvent(self, _event) -> None:  # noqa: N802 (Qt)
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        side = min(self.width(), self.height() - 40)
        rect = QRectF((self.width() - side) / 2 + 14, 14, side - 28, side - 28)
        width = max(10.0, side / 14)
        p.setPen(QPen(QColor("#3A4152"), width, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
        p.drawArc(rect, 225 * 16, -270 * 16)
        if self.fraction is not None:
            p.setPen(QPen(self.colour, width, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
            p.drawArc(rect, 225 * 16, int(-270 * 16 * self.fraction))
        p.setPen(QColor("#F4F6FA"))
        big = QFont()
        big.setPointSizeF(max(12.0, side / 7))
        big.setBold(True)
        p.setFont(big)
        text = "—" if self.fraction is None else f"{self.fraction * 100:.0f}%"
        p.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        small = QFont()
        small.setPointSizeF(max(9.0, side / 18))
        p.setFont(small)
        p.setPen(QColor("#AEB6C6"))
        below = QRectF(0, rect.bottom() - side * 0.12, self.width(), 40)
        p.drawText(below, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop, self.title)
        p.drawText(below.adjusted(0, 22, 0, 22), Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop,
                   self.caption or ("no data" if self.fraction is None else ""))
        p.end()
