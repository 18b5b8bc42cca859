"""Chat with the running engine: streamed answers with time to first token and tokens/s.

One conversation per served model: the model is named above the transcript, its `model` field is
sent with each request, and a new server or model starts a new chat (an old transcript sent as
context to another model makes its first answer noise). New chat starts one by hand."""

from __future__ import annotations

import html
import threading

from PySide6.QtCore import Signal
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QDoubleSpinBox, QFormLayout, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton,
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
        self.messages: list[dict] = []  # this conversation's turns (sent as context)
        self.samples: list[dict] = []  # every answer of the session, with the model that gave it (the report's)
        self.served = None  # ServedModel: who answers
        self._last_served = None  # the last one that did (kept across Stop)
        self._last_url: str | None = None
        self._conversation = 0
        self._asked_in = 0  # the conversation the streaming answer belongs to
        self._answer = ""
        self._prompt = ""
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None

        self.who = QLabel("No model running.")
        self.who.setObjectName("chatModel")
        self.who.setWordWrap(True)
        self.who.setTextFormat(Qt.TextFormat.RichText)
        self.new_button = QPushButton("New chat")
        self.new_button.setToolTip("Forget this conversation: the next prompt is sent without it")
        self.new_button.clicked.connect(lambda: self.new_chat())
        head = QHBoxLayout()
        head.addWidget(self.who, 1)
        head.addWidget(self.new_button, 0, Qt.AlignmentFlag.AlignTop)
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
        layout.addLayout(head)
        layout.addWidget(self.transcript, 1)
        layout.addWidget(self.prompt)
        layout.addLayout(form)
        layout.addLayout(buttons)
        self._piece.connect(self._on_piece)
        self._done.connect(self._on_done)
        self.set_server(None)

    def new_chat(self, why: str = "") -> None:
        """Start a new conversation (the session's samples stay for the report)."""
        if self.busy:
            self._cancel.set()
        self.messages = []
        self._conversation += 1  # an answer still streaming belongs to the old one
        self.transcript.clear()
        if why:
            self.transcript.append(f"<p style='color:#6b7280'><i>{html.escape(why)}</i></p>")

    def set_model(self, served) -> None:
        """The served model (a `ServedModel`, None: none): named above the transcript and in each
        request; another model than the last starts a new chat."""
        # Compared with the last model that answered, not the last state: Stop then Start of another
        # model passes through "none", and its history must not reach the new one.
        previous, self.served = self._last_served, served
        if served is not None:
            self._last_served = served
        if served is None:
            self.who.setText("No model running.")
            return
        noise = ("<br><span style='color:#C62828;font-size:13pt;font-weight:700'>Random weights: its answers are "
                 "noise</span>" if served.random_weights else "")
        self.who.setText(f"Chatting with <b>{html.escape(served.name)}</b>"
                         f"<br><span style='color:#6b7280'>{html.escape(served.label)}</span>{noise}")
        if previous is not None and previous.name != served.name and self.messages:
            self.new_chat(f"New chat: {served.name} is running now; the conversation with {previous.name} was not sent to it.")
        elif previous is not None and previous.url != served.url and self.messages:
            self.new_chat(f"New chat: {served.name} was started again ({served.url}); it has not seen this conversation.")

    def set_server(self, base_url: str | None, api_key: str | None = None) -> None:
        if base_url is not None and self._last_url is not None and base_url != self._last_url and self.messages:
            who = f" with {self._last_served.name}" if self._last_served is not None else ""
            self.new_chat(f"New chat: another server ({base_url}); the conversation{who} was not sent to it.")
        if base_url is not None:
            self._last_url = base_url
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
        self._asked_in = self._conversation
        self.transcript.append(f"<p><b>You:</b> {html.escape(text)}</p><p><b>Model:</b> ")
        self._cancel.clear()
        model = self.served.name if self.served is not None else "default"
        args = (self.base_url, list(self.messages), model, self.max_tokens.value(), self.temperature.value(),
                self.top_p.value())
        self._thread = threading.Thread(target=self._run, args=args, name="chat", daemon=True)
        self._thread.start()
        self.send_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.figures.setText("waiting for the first token…")

    def _run(self, url, messages, model, max_tokens, temperature, top_p) -> None:
        timing = AnswerTiming()
        try:
            for piece in stream_chat(url, messages, model=model, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                     api_key=self.api_key, timing=timing, should_stop=self._cancel.is_set):
                self._piece.emit(piece)
            self._done.emit(timing, "")
        except OSError as err:
            self._done.emit(timing, str(err) or type(err).__name__)

    def _on_piece(self, piece: str) -> None:
        self._answer += piece
        if self._asked_in != self._conversation:
            return  # the user started a new chat meanwhile
        cursor = self.transcript.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        cursor.insertText(piece)
        self.transcript.ensureCursorVisible()

    def _on_done(self, timing: AnswerTiming, error: str) -> None:
        if self._asked_in == self._conversation:
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
        sample = {"model": self.served.name if self.served is not None else "", "prompt": self._prompt,
                  "answer": self._answer, "random_weights": bool(self.served and self.served.random_weights), "ttft_s": timing.ttft_s, "tok_s": timing.tok_s,
                  "decode_tok_s": timing.decode_tok_s, "tokens": timing.tokens, "chunks": timing.chunks,
                  "tokens_counted_by": timing.tokens_counted_by}
        self.samples.append(sample)
        self.answered.emit(sample)
        self.send_button.setEnabled(self.base_url is not None)
        self.stop_button.setEnabled(False)
