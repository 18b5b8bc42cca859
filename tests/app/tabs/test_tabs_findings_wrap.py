"""Findings read on two lines at 1440x900 (issue 33 item 6): the message wraps, then elides."""

from __future__ import annotations

from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication

from bringup.app.tabs.findings_widgets import two_lines

MESSAGE = ("SGLang 0.5.17 picks the triton attention backend on XPU, and its constructor reads the value buffer "
           "of layer 0, which Nemotron-3-Nano keeps no KV cache for: the server stops with a ValueError")


def test_a_long_message_takes_two_lines_then_elides(qtbot):
    fm = QFontMetrics(QApplication.font())
    width = fm.horizontalAdvance(MESSAGE) // 3
    first, second = two_lines(fm, MESSAGE, width)
    assert fm.horizontalAdvance(first) <= width and fm.horizontalAdvance(second) <= width
    assert MESSAGE.startswith(first) and second.endswith("\u2026")
    assert first.split()[-1] + " " + second.split()[0] in MESSAGE  # cut at a word, nothing dropped between
    assert two_lines(fm, "short", width) == ["short"]
