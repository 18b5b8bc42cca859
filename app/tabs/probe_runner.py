"""Runs the device probe off the GUI thread and reports back through queued Qt signals.

The probe itself runs in child processes (`bringup.core.probe.runner`), so a segfaulting `torch.xpu`
never reaches us; this object only keeps the waiting off the GUI thread. A plain Python thread is
enough: signals emitted from it are queued onto the GUI thread, and quitting the app cancels the
probe (the probe polls `cancel` every quarter second) and joins the thread briefly.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import QCoreApplication, QObject, Signal


class ProbeRunner(QObject):
    step = Signal(object)  # a StepResult, as each step finishes
    finished = Signal(object)  # the ProbeReport
    failed = Signal(str)  # the probe's parent side raised (the child's failures are steps, not this)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.stop)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, **options) -> bool:
        """Start a probe with `run_probe` keywords (timeout, steps, simulate); False if one runs."""
        if self.running:
            return False
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._cancel, options), name="device-probe", daemon=True)
        self._thread.start()
        return True

    def stop(self, wait_s: float = 2.0) -> None:
        """Cancel a running probe (its child is killed) and wait a little for the thread."""
        self._cancel.set()
        if self._thread is not None:
            self._thread.join(wait_s)

    def _run(self, cancel: threading.Event, options: dict) -> None:
        from bringup.core.probe.runner import run_probe

        def emit(signal, value) -> None:
            try:
                signal.emit(value)
            except RuntimeError:  # this object is gone (window closed): stop probing
                cancel.set()

        try:
            report = run_probe(on_step=lambda s: emit(self.step, s), cancel=cancel.is_set, **options)
        except Exception as exc:  # noqa: BLE001  (shown in the window, never a traceback)
            emit(self.failed, f"{type(exc).__name__}: {exc}")
            return
        if not cancel.is_set():
            emit(self.finished, report)
