"""Chat with the running engine: streamed answers with time to first token and tokens/s."""

from __future__ import annotations

import html
import threading

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QDoubleSpinBox, QFormLayout, QHBoxLayout, QPlainTextEdit, QPushButton,
                               QSpinBox, QTextBrowser, QVBoxLayout, QWidget)

from bringup.app.elided_label import ElidedLabel
from bringup.core.client.chat import AnswerTiming, stream_chat


class ChatPanel(QWidget):
    _piece = Signal(str)
    _done = Signal(object, str)  # AnswerTiming, error text ("" when fine)
    answered = Signal(dict)  # prompt, answer, ttft_s, tok_s, decode_tok_s: for the report

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.base_url: str | None = None
        self.api_key: str | None = None
        self.messages: list[dict] = []
        self.samples: list[dict] = []
        self._answer = ""
        self._prompt = ""
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None

        self.transcript = QTextBrowser()
        self.prompt = QPlainTextEdit(placeholderText="Ask the model something…")
        self.prompt.setMaximumHeight(80)
        self.send_button = QPushButton("Send")
        self.send_button.clicked.connect(lambda: self.send())  # not connect(self.send): clicked passes checked=False as `text`
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self._cancel.set)
        self.max_tokens = QSpinBox(minimum=1, maximum=8192, value=128)
        self.temperature = QDoubleSpinBox(minimum=0.0, maximum=2.0, singleStep=0.1, value=0.7)
        self.top_p = QDoubleSpinBox(minimum=0.05, maximum=1.0, singleStep=0.05, value=1.0)
        self.figures = ElidedLabel("—")  # an error can be a page long: it must not widen the window
        form = QFormLayout()
        form.addRow("max tokens", self.max_tokens)
        form.addRow("temperature", self.temperature)
        form.addRow("top-p", self.top_p)
        buttons = QHBoxLayout()
        buttons.addWidget(self.figures, 1)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.send_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.transcript, 1)
        layout.addWidget(self.prompt)
        layout.addLayout(form)
        layout.addLayout(buttons)
        self._piece.connect(self._on_piece)
        self._done.connect(self._on_done)
        self.set_server(None)

    def set_server(self, base_url: str | None, api_key: str | None = None) -> None:
        self.base_url, self.api_key = base_url, api_key
        self.send_button.setEnabled(base_url is not None and not self.busy)
        self.stop_button.setEnabled(self.busy)
        if base_url is None:
            self.figures.setText("Start or attach an engine to chat.")
        elif not self.busy:
            self.figures.setText("Ready: type a prompt and press Send.")

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def send(self, text: str | None = None) -> None:
        text = (text if text is not None else self.prompt.toPlainText()).strip()
        if not text or not self.base_url or self.busy:
            return
        self.prompt.clear()
        self._prompt, self._answer = text, ""
        self.messages.append({"role": "user", "content": text})
        self.transcript.append(f"<p><b>You:</b> {html.escape(text)}</p><p><b>Model:</b> ")
        self._cancel.clear()
        args = (self.base_url, list(self.messages), self.max_tokens.value(), self.temperature.value(), self.top_p.value())
        self._thread = threading.Thread(target=self._run, args=args, name="chat", daemon=True)
        self._thread.start()
        self.send_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.figures.setText("waiting for the first token…")

    def _run(self, url, messages, max_tokens, temperature, top_p) -> None:
        timing = AnswerTiming()
        try:
            for piece in stream_chat(url, messages, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                     api_key=self.api_key, timing=timing, should_stop=self._cancel.is_set):
                self._piece.emit(piece)
            self._done.emit(timing, "")
        except OSError as err:
            self._done.emit(timing, str(err) or type(err).__name__)

    def _on_piece(self, piece: str) -> None:
        self._answer += piece
        cursor = self.transcript.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        cursor.insertText(piece)
        self.transcript.ensureCursorVisible()

    def _on_done(self, timing: AnswerTiming, error: str) -> None:
        self.messages.append({"role": "assistant", "content": self._answer})
        parts = []
        if timing.ttft_s is not None:
            parts.append(f"TTFT {timing.ttft_s * 1000:.0f} ms")
        if timing.tok_s is not None:
            parts.append(f"{timing.tok_s:.1f} tok/s")
        if timing.decode_tok_s is not None:
            parts.append(f"2nd+ {timing.decode_tok_s:.1f} tok/s")
        counted = "" if timing.tokens_counted_by == "server" else " (stream chunks: the server sent no token count)"
        parts.append(f"{timing.tokens} tokens{counted}")
        self.figures.setText(" · ".join(parts) if not error else f"error: {error}")
        if error:
            self.transcript.append(f"<p style='color:#C62828'>{html.escape(error)}</p>")
        sample = {"prompt": self._prompt, "answer": self._answer, "ttft_s": timing.ttft_s, "tok_s": timing.tok_s,
                  "decode_tok_s": timing.decode_tok_s, "tokens": timing.tokens, "chunks": timing.chunks,
                  "tokens_counted_by": timing.tokens_counted_by}
        self.samples.append(sample)
        self.answered.emit(sample)
        self.send_button.setEnabled(self.base_url is not None)
        self.stop_button.setEnabled(False)
