"""Put load on the engine so the graphs show it at work; stops cleanly."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QFormLayout, QHBoxLayout, QLabel, QPushButton, QSpinBox, QVBoxLayout, QWidget

from bringup.core.client.load_generator import LoadGenerator, LoadSettings


def _range_row(lo: int, hi: int, maximum: int) -> tuple[QHBoxLayout, QSpinBox, QSpinBox]:
    a, b = QSpinBox(minimum=1, maximum=maximum, value=lo), QSpinBox(minimum=1, maximum=maximum, value=hi)
    row = QHBoxLayout()
    row.addWidget(a)
    row.addWidget(QLabel("to"))
    row.addWidget(b)
    return row, a, b


class LoadPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.base_url: str | None = None
        self.api_key: str | None = None
        self.generator: LoadGenerator | None = None
        self.concurrency = QSpinBox(minimum=1, maximum=256, value=8)
        row_p, self.prompt_min, self.prompt_max = _range_row(16, 96, 8192)
        row_o, self.output_min, self.output_max = _range_row(32, 128, 8192)
        form = QFormLayout()
        form.addRow("concurrent requests", self.concurrency)
        form.addRow("prompt words", row_p)
        form.addRow("output tokens", row_o)
        self.start_button = QPushButton("Start load")
        self.start_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop load")
        self.stop_button.clicked.connect(self.stop)
        self.status = QLabel("idle")
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.stop_button)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addStretch(1)
        self._timer = QTimer(self, interval=500)
        self._timer.timeout.connect(self._refresh)
        self.set_server(None)

    @property
    def running(self) -> bool:
        return self.generator is not None and self.generator.running

    def set_server(self, base_url: str | None, api_key: str | None = None) -> None:
        if base_url is None and self.running:
            self.stop()
        self.base_url, self.api_key = base_url, api_key
        self.start_button.setEnabled(base_url is not None and not self.running)
        self.stop_button.setEnabled(self.running)

    def start(self) -> None:
        if not self.base_url or self.running:
            return
        lo_p, hi_p = sorted((self.prompt_min.value(), self.prompt_max.value()))
        lo_o, hi_o = sorted((self.output_min.value(), self.output_max.value()))
        settings = LoadSettings(concurrency=self.concurrency.value(), prompt_words=(lo_p, hi_p),
                                output_tokens=(lo_o, hi_o), api_key=self.api_key)
        self.generator = LoadGenerator(self.base_url, settings)
        self.generator.start()
        self._timer.start()
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self._refresh()

    def stop(self) -> None:
        if self.generator is not None:
            self.generator.stop()
        self._timer.stop()
        self._refresh()
        self.start_button.setEnabled(self.base_url is not None)
        self.stop_button.setEnabled(False)

    def _refresh(self) -> None:
        g = self.generator
        if g is None:
            self.status.setText("idle")
            return
        s = g.stats
        state = "running" if g.running else "stopped"
        text = f"{state}: {s.started} sent, {s.completed} completed, {s.failed} failed, {s.tokens} tokens streamed"
        if s.last_error:
            text += f"<br><span style='color:#C62828'>last error: {s.last_error}</span>"
        self.status.setText(text)
