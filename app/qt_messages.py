"""Qt's own warnings, less one that is noise: the offscreen platform (used for --screenshot and by
tests) says "This plugin does not support propagateSizeHints()" for every top-level window, which
tells the user nothing. Everything else is printed as Qt prints it."""

from __future__ import annotations

import sys

NOISE = ("This plugin does not support propagateSizeHints()",)


def _handler(_mode, context, message: str) -> None:
    if message in NOISE:
        return
    category = getattr(context, "category", None)
    prefix = f"{category}: " if category and category != "default" else ""
    print(f"{prefix}{message}", file=sys.stderr)


def quiet_known_noise() -> None:
    from PySide6.QtCore import qInstallMessageHandler

    qInstallMessageHandler(_handler)
