"""Runs a list of prompts against a server, a few at a time, round and round (demo mode)."""

from __future__ import annotations

import itertools
import threading

from PySide6.QtCore import QObject, Signal

from bringup.core.client.chat import AnswerTiming, stream_chat


class PromptRunner(QObject):
    started = Signal(int)  # prompt index
    piece = Signal(int, str)
    finished = Signal(int, object, str)  # index, AnswerTiming, error ("" when fine)

    def __init__(self, base_url: str, prompts: list[str], *, concurrency: int = 4, max_tokens: int = 96,
                 temperature: float = 0.7, api_key: str | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.api_key = api_key
        self.base_url, self.prompts = base_url, list(prompts)
        self.concurrency, self.max_tokens, self.temperature = concurrency, max_tokens, temperature
        self._stop = threading.Event()
        self._order = itertools.cycle(range(len(self.prompts)))
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._threads = [threading.Thread(target=self._worker, name=f"demo-{i}", daemon=True)
                         for i in range(self.concurrency)]
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 3.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)

    def _worker(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                index = next(self._order)
            self.started.emit(index)
            timing = AnswerTiming()
            try:
                messages = [{"role": "user", "content": self.prompts[index]}]
                for piece in stream_chat(self.base_url, messages, max_tokens=self.max_tokens,
                                         temperature=self.temperature, api_key=self.api_key, timing=timing,
                                         should_stop=self._stop.is_set):
                    self.piece.emit(index, piece)
                self.finished.emit(index, timing, "")
            except OSError as err:
                self.finished.emit(index, timing, str(err))
                self._stop.wait(1.0)
