"""The Diagnose tab on realistic logs: paste, open, drop; findings light up the layer map."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QTabWidget, QWidget

import pytest

from bringup.app.layermap.highlight import Highlight
from bringup.app.tabs.diagnose_tab import DiagnoseTab, read_log
from tabs_helpers import LAYER0_CRASH_LOG, NEMOTRON_NANO, layer_map

NANO_ATTENTION = [5, 12, 19, 26, 33, 42]
OOM_LOG = """\
[2026-07-23 11:02:00 TP0] Load weight end. elapsed=40.10 s, type=NemotronHForCausalLM, avail mem=1.02 GB, mem usage=58.90 GB.
[2026-07-23 11:02:01 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/sglang/python/sglang/srt/mem_cache/kv_cache_configurator.py", line 212, in _handle_max_mamba_cache
    raise RuntimeError(
RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size=0 (total_rest_memory=0.61 GB, mamba_cache_per_req=46.81 MB). Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or (4) use GPUs with more memory.
"""


@pytest.fixture
def tab(qtbot):
    tab = DiagnoseTab()
    qtbot.addWidget(tab)
    tab.set_layer_map(layer_map(NEMOTRON_NANO))
    return tab


def test_pasted_layer_index_crash_lights_up_layer_0_and_the_six_attention_layers(tab, qtbot):
    with qtbot.waitSignal(tab.highlight_requested, timeout=3000) as blocker:
        tab.log.setPlainText(LAYER0_CRASH_LOG)  # a paste: diagnosed after the debounce
    highlight = blocker.args[0]
    assert isinstance(highlight, Highlight)
    assert highlight.requested == [0]
    assert highlight.related == NANO_ATTENTION
    assert highlight.severity == "error"
    assert "Layer 0" in highlight.message
    finding = tab.findings.current_finding()
    assert finding["code"] == "LAYER_NOT_IN_FULL_ATTENTION"
    details = tab.findings.details.toPlainText()
    assert "mamba2" in details and "5, 12, 19, 26, 33, 42" in details
    assert "Fix" in details
    assert "device xpu" in tab.summary.text()
    assert not tab.grab().isNull()  # the findings delegate paints
    # Ctrl+C copies the finding as text.
    tab.findings.copy_current()
    from PySide6.QtGui import QGuiApplication

    copied = QGuiApplication.clipboard().text()
    assert copied.startswith("[ERROR] LAYER_NOT_IN_FULL_ATTENTION") and "Fix: " in copied
    # The log line it was read from is marked.
    marked = tab.log.extraSelections()
    assert marked and "layer_id=0" in marked[0].cursor.block().text()


def test_clicking_another_finding_and_clearing(tab, qtbot):
    tab.set_text(OOM_LOG + LAYER0_CRASH_LOG, "two.log")
    codes = [f["code"] for f in tab.findings.findings()]
    assert "LAYER_NOT_IN_FULL_ATTENTION" in codes and len(codes) >= 2
    rows = {f["code"]: i for i, f in enumerate(tab.findings.findings())}
    assert "STATE_CACHE_NO_MEMORY" in rows
    with qtbot.waitSignal(tab.highlight_requested) as blocker:
        tab.findings.select(rows["LAYER_NOT_IN_FULL_ATTENTION"])
    assert blocker.args[0].requested == [0]
    with qtbot.waitSignal(tab.highlight_requested) as blocker:
        tab.findings.select(rows["STATE_CACHE_NO_MEMORY"])
    assert blocker.args[0] is None  # names no layer: the map's marks clear
    assert "mem-fraction-static" in tab.findings.details.toPlainText()
    with qtbot.waitSignal(tab.highlight_requested) as blocker:
        tab.clear()
    assert blocker.args[0] is None
    assert tab.findings.findings() == []


def test_open_file_and_drop_on_the_window(tab, qtbot, tmp_path):
    log = tmp_path / "launch.log"
    log.write_text(LAYER0_CRASH_LOG)
    tab.open_file(str(log))
    assert tab.log_label.text() == "launch.log"
    assert tab.findings.findings()[0]["requested_layer"] == 0

    # A file dropped anywhere on the window opens here, and this tab comes forward.
    window = QTabWidget()
    qtbot.addWidget(window)
    other = QWidget()
    window.addTab(other, "Other")
    fresh = DiagnoseTab()
    window.addTab(fresh, "Diagnose")
    window.show()
    qtbot.waitExposed(window)
    window.setCurrentWidget(fresh)  # shown once: it starts watching the window's drops
    window.setCurrentWidget(other)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(log))])
    drop = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    assert fresh._window_filter.eventFilter(window, drop)
    assert window.currentWidget() is fresh
    assert fresh.findings.findings()[0]["code"] == "LAYER_NOT_IN_FULL_ATTENTION"


def test_paste_button_takes_the_clipboard(tab):
    from PySide6.QtGui import QGuiApplication

    QGuiApplication.clipboard().setText(LAYER0_CRASH_LOG)
    tab.paste()
    assert tab.log_label.text() == "pasted text"
    assert tab.findings.current_finding()["requested_layer"] == 0


def test_unknown_log_and_unreadable_file(tab, tmp_path):
    tab.set_text("INFO all good\nThe server is fired up and ready to roll!\n")
    assert tab.findings.findings() == []
    assert "No known failure" in tab.summary.text()
    tab.open_file(str(tmp_path / "missing.log"))
    assert "Cannot read" in tab.summary.text()


def test_read_log_keeps_the_tail_of_a_huge_file(qtbot, tmp_path, monkeypatch):
    import bringup.app.tabs.diagnose_tab as diagnose_tab

    monkeypatch.setattr(diagnose_tab, "MAX_LOG_BYTES", 64)
    path = tmp_path / "big.log"
    path.write_bytes(b"x" * 1000 + b"\nValueError: the end\n")
    text = read_log(path)
    assert text.endswith("ValueError: the end\n") and len(text) == 64
    tab = DiagnoseTab()
    tab.open_file(str(path))
    assert "(its last 64 B)" in tab.log_label.text()  # says it shows only the tail


def test_a_big_log_is_diagnosed_off_the_gui_thread(tab, qtbot, monkeypatch):
    import bringup.app.tabs.diagnose_tab as diagnose_tab

    monkeypatch.setattr(diagnose_tab, "INLINE_CHARS", 100)
    noise = "[2026-07-23 10:02:00 TP0] Decode batch, #running-req: 3, gen throughput (token/s): 42.1\n" * 50
    with qtbot.waitSignal(tab.diagnosed, timeout=5000):
        tab.set_text(noise + LAYER0_CRASH_LOG, "big.log")
        assert "Reading" in tab.summary.text()  # returned at once; the thread is still at it
    assert tab.findings.findings()[0]["requested_layer"] == 0
    # A result for text that has changed since is dropped.
    tab.set_text(noise + LAYER0_CRASH_LOG, "big.log")
    tab.log.setPlainText("")
    tab.diagnose()
    qtbot.wait(300)
    assert tab.findings.findings() == []


def test_a_config_json_dropped_on_the_window_is_not_taken_for_a_log(tab, qtbot, tmp_path):
    from PySide6.QtWidgets import QMainWindow

    window = QMainWindow()
    qtbot.addWidget(window)
    fresh = DiagnoseTab()
    window.setCentralWidget(fresh)
    window.show()
    qtbot.waitExposed(window)
    config = tmp_path / "config.json"
    config.write_text("{}")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(config))])
    drop = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    assert not fresh._window_filter.eventFilter(window, drop)
    assert fresh.log.toPlainText() == ""
