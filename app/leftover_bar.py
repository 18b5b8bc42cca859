"""Found at start: engines an earlier window left running (it was killed in a way no guard caught).
The bar names them and offers to end them; nothing is ended without the user's word."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QWidget

from bringup.core.client.engine_records import EngineRecord, end_leftover, scan_records


class LeftoverEnginesBar(QFrame):
    cleaned = Signal(int)  # how many were ended

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("leftoverBar")
        self.records: list[EngineRecord] = []
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.end_button = QPushButton("End them")
        self.end_button.clicked.connect(self.end_all)
        self.keep_button = QPushButton("Leave running")
        self.keep_button.clicked.connect(self.hide)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 6, 6)
        row.addWidget(self.label, 1)
        row.addWidget(self.end_button)
        row.addWidget(self.keep_button)
        self.hide()

    def check(self) -> list[EngineRecord]:
        """Offer to end only the engines whose records are proved; say which records were removed."""
        scan = scan_records()
        self.records = scan.found
        notes = " ".join(escape(note) for note in scan.notes)
        n = len(self.records)
        self.end_button.setVisible(n > 0)
        if n:
            self.keep_button.setText("Leave running")
            self.end_button.setText("End it" if n == 1 else "End them")
            items = "; ".join(escape(r.describe()) for r in self.records)
            self.label.setText(f"<b>{'An engine' if n == 1 else f'{n} engines'} from an earlier session "
                               f"{'is' if n == 1 else 'are'} still running</b> (its window is gone), holding "
                               f"{'its port' if n == 1 else 'their ports'} and memory: {items}." + (f" {notes}" if notes else ""))
        elif notes:
            self.keep_button.setText("OK")
            self.label.setText(f"<b>Engine records that did not match their process were removed.</b> {notes}")
        self.setVisible(bool(n or notes))
        return self.records

    def end_all(self) -> int:
        ended = [r for r in self.records if end_leftover(r)]
        left = [r for r in self.records if r not in ended]
        self.records = left
        if left:
            self.label.setText("Could not end " + "; ".join(escape(r.describe()) for r in left)
                               + " (it no longer matches its record, or belongs to another user). "
                               "If it is yours, end it from a terminal: kill PID.")
        else:
            self.hide()
        self.cleaned.emit(len(ended))
        return len(ended)
