"""Run a blocking call (a device measurement, a big parse) on a daemon thread and get its result
back on the GUI thread, through queued Qt signals. A result that arrives after its widget is gone
is dropped quietly."""

from __future__ import annotations

import sys
import threading
import traceback

from PySide6.QtCore import QObject, Signal


class Background(QObject):
    done = Signal(object, object)  # (token, result)
    failed = Signal(object, str)  # (token, what went wrong, for people)

    def run(self, fn, token=None) -> threading.Thread:
        """Call `fn()` on a thread; `token` comes back with the answer (e.g. to drop stale ones)."""

        def emit(signal, *args) -> None:
            try:
                signal.emit(*args)
            except RuntimeError:  # the receiver is gone (window closed)
                pass

        def work() -> None:
            from bringup.core.errors import UserError

            try:
                result = fn()
            except UserError as exc:
                emit(self.failed, token, str(exc))
            except Exception as exc:  # noqa: BLE001  (a bug: shown in the window, traceback on stderr)
                traceback.print_exc(file=sys.stderr)
                emit(self.failed, token, f"{type(exc).__name__}: {exc}. This is a bug in the workbench; please report it")
            else:
                emit(self.done, token, result)

        thread = threading.Thread(target=work, name="bringup-background", daemon=True)
        thread.start()
        return thread
