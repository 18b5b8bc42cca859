"""Where the window opens: the size it had last time, or a default that fits, always on a screen
the user has now (a laptop undocked from a big monitor must not open the window off screen)."""

from __future__ import annotations

from PySide6.QtCore import QRect
from PySide6.QtGui import QGuiApplication

DEFAULT_SIZE = (1440, 900)
MIN_SIZE = (800, 560)


def available_area(point=None) -> QRect:
    """The usable area (without panels and docks) of the screen at `point`, else the primary one."""
    screen = QGuiApplication.screenAt(point) if point is not None else None
    screen = screen or QGuiApplication.primaryScreen()
    return screen.availableGeometry() if screen is not None else QRect(0, 0, *DEFAULT_SIZE)


def fit_rect(rect: QRect, area: QRect) -> QRect:
    """`rect` shrunk to fit inside `area` and moved fully onto it."""
    w = max(min(rect.width(), area.width()), min(MIN_SIZE[0], area.width()))
    h = max(min(rect.height(), area.height()), min(MIN_SIZE[1], area.height()))
    x = min(max(rect.x(), area.left()), area.right() + 1 - w)
    y = min(max(rect.y(), area.top()), area.bottom() + 1 - h)
    return QRect(x, y, w, h)


def default_rect(area: QRect) -> QRect:
    """The default size, or 94 % of a smaller screen, centred."""
    w = min(DEFAULT_SIZE[0], int(area.width() * 0.94))
    h = min(DEFAULT_SIZE[1], int(area.height() * 0.94))
    return QRect(area.x() + (area.width() - w) // 2, area.y() + (area.height() - h) // 2, w, h)


def place(window, saved_geometry=None) -> None:
    """Restore the saved geometry (if any) and make sure the window lies within a screen."""
    if saved_geometry is not None and window.restoreGeometry(saved_geometry):
        frame = window.geometry()
        area = available_area(frame.center())
        if not area.contains(frame):
            window.setGeometry(fit_rect(frame, area))
        return
    window.setGeometry(default_rect(available_area()))
