"""SIGTERM and Ctrl+C quit the window the ordinary way, so that engines are stopped.

Python's default SIGTERM ends the process at once: Qt's aboutToQuit never fires and a running
engine is left behind as an orphan holding its port and device memory. Here both signals ask the
event loop to quit instead. Python runs signal handlers only when it holds control, and a Qt event
loop keeps it in C++, so a light timer hands control back a few times a second.
"""

from __future__ import annotations

import signal


def quit_on_signals(app) -> None:
    from PySide6.QtCore import QTimer

    def _quit(_signum, _frame) -> None:
        app.quit()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _quit)
    timer = QTimer(app)
    timer.timeout.connect(lambda: None)
    timer.start(250)
