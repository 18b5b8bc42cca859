"""Loads a layer map in a background thread, so a slow hub download never freezes the window.

Cancel returns control at once: the thread is told to stop at its next step, and whatever it
returns afterwards is ignored (a network call cannot be interrupted, but it no longer matters).
"""

from __future__ import annotations

import sys
import threading
import traceback

from PySide6.QtCore import QObject, QThread, Signal

from bringup.core.errors import UserError


class _LoadThread(QThread):
    progress = Signal(str)
    loaded = Signal(object)
    failed = Signal(str)

    def __init__(self, source: str, pp: int, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.source = source
        self.pp = pp
        self.cancel_flag = threading.Event()

    def run(self) -> None:
        from bringup.core.sources.resolve import LoadCancelled, load_layer_map

        try:
            layer_map = load_layer_map(self.source, pp=self.pp, progress=self.progress.emit, cancel=self.cancel_flag.is_set)
        except LoadCancelled:
            return
        except UserError as err:
            self.failed.emit(str(err))
        except Exception as err:  # a bug in a loader must not take the window down
            traceback.print_exc(file=sys.stderr)
            self.failed.emit(f"could not load {self.source}: {type(err).__name__}: {err}. "
                             "This is a bug in the workbench; please report it with the model's config.json")
        else:
            self.loaded.emit(layer_map)


class ModelLoader(QObject):
    """One load at a time; a new load or cancel abandons the one before."""

    started = Signal(str)  # source
    progress = Signal(str)
    loaded = Signal(object)  # LayerMap
    failed = Signal(str)  # the UserError text
    cancelled = Signal(str)  # source
    finished = Signal()  # after loaded, failed or cancelled

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._current: _LoadThread | None = None
        self._threads: set[_LoadThread] = set()  # kept alive until each thread ends

    @property
    def busy(self) -> bool:
        return self._current is not None

    def current_request(self) -> tuple[str, int] | None:
        """(source, pp) of the load in progress, or None."""
        return (self._current.source, self._current.pp) if self._current is not None else None

    def load(self, source: str, pp: int = 1) -> None:
        self._abandon()
        thread = _LoadThread(source, pp)
        self._current = thread
        self._threads.add(thread)
        thread.progress.connect(lambda text, t=thread: self._if_current(t, self.progress.emit, text))
        thread.loaded.connect(lambda lm, t=thread: self._done(t, self.loaded.emit, lm))
        thread.failed.connect(lambda text, t=thread: self._done(t, self.failed.emit, text))
        thread.finished.connect(lambda t=thread: self._reap(t))
        self.started.emit(source)
        thread.start()

    def cancel(self) -> None:
        thread = self._current
        if thread is None:
            return
        self._abandon()
        self.cancelled.emit(thread.source)
        self.finished.emit()

    def wait(self, msecs: int = 3000) -> bool:
        """Let running threads end (at exit), so none is destroyed while it runs. False if one
        is still stuck (in a network call): the caller should then leave with os._exit."""
        for thread in list(self._threads):
            thread.wait(msecs)
        return not any(t.isRunning() for t in self._threads)

    def _abandon(self) -> None:
        if self._current is not None:
            self._current.cancel_flag.set()
            self._current = None

    def _if_current(self, thread: _LoadThread, emit, value) -> None:
        if thread is self._current:
            emit(value)

    def _done(self, thread: _LoadThread, emit, value) -> None:
        if thread is not self._current:
            return
        self._current = None
        emit(value)
        self.finished.emit()

    def _reap(self, thread: _LoadThread) -> None:
        self._threads.discard(thread)
        if thread is self._current:  # ended without a result: cancelled from inside the loader
            self._current = None
            self.finished.emit()
        thread.deleteLater()
