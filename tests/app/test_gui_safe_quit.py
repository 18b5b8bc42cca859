"""Quit asks before a session with chat, load runs or findings is lost (issue 33 item 8)."""

from __future__ import annotations

from PySide6.QtCore import QTimer

from gui_helpers import LAYER0_LOG as LOG  # a real crash log: Diagnose finds the layer-0 error in it


def _window(qtbot, monkeypatch):
    from bringup.app import tabs as tab_registry
    from bringup.app.main_window import MainWindow

    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", ["bringup.app.tabs.run_tab:RunTab",
                                                        "bringup.app.tabs.diagnose_tab:DiagnoseTab"])
    w = MainWindow()
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.settled, timeout=10000):
        w.load("default")
    w.confirm_quit = True  # as `bringup gui` does
    w.show()
    return w


def _answer(window, which: str, seen: list) -> None:
    def click():
        box = window.quit_question
        seen.append(box.text())
        getattr(box, which).click()
    QTimer.singleShot(0, click)


def test_an_empty_session_quits_at_once(qtbot, monkeypatch):
    w = _window(qtbot, monkeypatch)
    assert w.close() and not w.isVisible()


def test_a_session_with_findings_and_chat_asks_and_cancel_keeps_it(qtbot, monkeypatch):
    w = _window(qtbot, monkeypatch)
    w.tab("Diagnose").set_text(LOG, "crash.log")
    w.tab("Run").chat.samples.append({"model": "default", "prompt": "hi", "answer": "noise"})
    seen: list[str] = []
    _answer(w, "cancel_button", seen)
    assert not w.close() and w.isVisible()
    assert "1 chat answer" in seen[0] and "diagnosis finding" in seen[0]
    _answer(w, "quit_button", seen)
    assert w.close() and not w.isVisible()
