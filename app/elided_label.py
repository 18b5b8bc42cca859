"""A one-line label that never widens its window: long text is elided to the width it is given,
and the whole text is in its tooltip and on its context menu's Copy."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QGuiApplication, QTextDocument
from PySide6.QtWidgets import QLabel, QMenu, QSizePolicy, QWidget

def plain_text(text: str) -> str:
    """Rich text as the user reads it (tags dropped, entities decoded)."""
    if "<" not in text and "&" not in text:
        return text
    doc = QTextDocument()
    doc.setHtml(text)
    return doc.toPlainText()


class ElidedLabel(QLabel):
    """Set text with `setText` (plain or rich); it shows what fits, ending in "…"."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(40)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu)
        self.setText(text)

    def text(self) -> str:
        """The whole text as given (rich text kept), not the elided one on screen."""
        return self._full

    def shown_text(self) -> str:
        """What is on screen now, perhaps elided."""
        return QLabel.text(self)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt)
        self._full = text or ""
        plain = plain_text(self._full)
        self.setToolTip(plain if len(plain) > 40 else "")
        self._refit()

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt): one line high, any width
        return QSize(min(400, super().sizeHint().width()), super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt)
        return QSize(40, super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt)
        super().resizeEvent(event)
        self._refit()

    def _refit(self) -> None:
        plain = plain_text(self._full).replace("\n", " ")
        metrics = self.fontMetrics()
        width = max(10, self.width() - 4)
        if metrics.horizontalAdvance(plain) <= width:
            QLabel.setText(self, self._full.replace("\n", " ") if "<" in self._full else plain)
        else:  # rich markup cannot be cut safely: elide the plain words
            QLabel.setText(self, metrics.elidedText(plain, Qt.TextElideMode.ElideRight, width))

    def copy_full_text(self) -> None:
        QGuiApplication.clipboard().setText(plain_text(self._full))

    def _menu(self, pos) -> None:
        menu = QMenu(self)
        menu.addAction("Copy", self.copy_full_text)
        menu.exec(self.mapToGlobal(pos))
