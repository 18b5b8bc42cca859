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


def test_read_log_keeps_the_head_and_tail_of_a_huge_file_and_says_so(qtbot, tmp_path, monkeypatch):
    import bringup.app.tabs.diagnose_tab as diagnose_tab

    monkeypatch.setattr(diagnose_tab, "MAX_LOG_BYTES", 400)
    path = tmp_path / "big.log"
    path.write_bytes(b"vllm serve m --tensor-parallel-size 2\n" + b"chatter\n" * 1000 + b"ValueError: the end\n")
    text = read_log(path)
    assert text.startswith("vllm serve m") and text.endswith("ValueError: the end\n") and "skipped" in text
    tab = DiagnoseTab()
    qtbot.addWidget(tab)
    tab.open_file(str(path))
    assert "head and tail" in tab.log_label.text()
    assert "bytes of the middle" in tab.summary.text()  # the note says what was not read


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


QWEN_PP_LOG = """\
(APIServer pid=5963) INFO 09-27 11:31:37 [api_server.py:1896] vLLM API server version 0.10.2
vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --pipeline-parallel-size 2
(EngineCore_DP0 pid=6106) INFO 09-27 11:31:49 [gpu_model_runner.py:2000] Model loading took 74.56 GiB
(EngineCore_DP0 pid=6106) ERROR 09-27 11:31:52 [core.py:718] Traceback (most recent call last):
(EngineCore_DP0 pid=6106) ERROR 09-27 11:31:52 [core.py:718]   File "/usr/lib/python3/site-packages/vllm/v1/worker/gpu_model_runner.py", line 5382, in initialize_attn_backend
(EngineCore_DP0 pid=6106) ERROR 09-27 11:31:52 [core.py:718]     attn_backends = get_attn_backends_for_group(kv_cache_group_spec)
(EngineCore_DP0 pid=6106) ERROR 09-27 11:31:52 [core.py:718] KeyError: 'language_model.model.layers.30.linear_attn'
"""


@pytest.fixture
def qwen_tab(qtbot):
    from repo_paths import SHARED_MODELS

    tab = DiagnoseTab()
    qtbot.addWidget(tab)
    tab.set_layer_map(layer_map(str(SHARED_MODELS / "Qwen__Qwen3-Next-80B-A3B-Instruct.json")))
    return tab


def test_a_layer_named_only_by_a_module_path_is_marked_on_the_map(qwen_tab, qtbot):
    with qtbot.waitSignal(qwen_tab.highlight_requested, timeout=3000) as blocker:
        qwen_tab.set_text(QWEN_PP_LOG, "pp.log")
    highlight = blocker.args[0]
    assert highlight.requested == [30] and highlight.severity == "error"
    panel = qwen_tab.reading
    assert "Failed at line 7" in panel.headline.text() and "layer" in panel.headline.text().lower()
    assert "layer 30 is a gated_delta_net layer" in panel.layers.text()
    assert "PP stage 1 of 2" in panel.layers.text()
    # The stage timeline: weights loaded (green), died sizing the pools (red), graphs not reached.
    state = panel.timeline.state
    assert state["model_load"] == "reached" and state["kv_cache"] == "died" and state["graph_capture"] == "not reached"
    assert "gpu_model_runner.py:5382 in initialize_attn_backend" in panel.source.toPlainText()


def test_copy_as_issue_report_puts_markdown_and_the_map_image_on_the_clipboard(qwen_tab, qtbot, tmp_path, monkeypatch):
    from PySide6.QtGui import QGuiApplication, QImage

    monkeypatch.setenv("HOME", str(tmp_path))
    qwen_tab.set_text(QWEN_PP_LOG, "pp.log")
    image = QImage(40, 10, QImage.Format.Format_RGB32)
    image.fill(0x3366CC)
    qwen_tab.map_image = lambda: image
    text = qwen_tab.copy_issue_report()
    clip = QGuiApplication.clipboard()
    assert clip.text() == text
    assert "- **Engine:** vllm" in text and "version `0.10.2`" in text
    assert "- **Class:** layer_lookup" in text and "layer 30 is a gated_delta_net layer" in text
    assert "![layer map](" in text and (tmp_path / ".cache" / "bringup" / "reports" / "diagnose-layer-map.png").is_file()
    assert not clip.image().isNull()


def test_a_utf16_log_dropped_in_is_read_and_a_binary_one_refused(tab, tmp_path):
    import codecs

    path = tmp_path / "win.log"
    path.write_bytes(codecs.BOM_UTF16_LE + LAYER0_CRASH_LOG.encode("utf-16-le"))
    tab.open_file(str(path))
    assert tab.findings.findings()[0]["requested_layer"] == 0
    blob = tmp_path / "core.bin"
    blob.write_bytes(bytes(100_000))
    tab.open_file(str(blob))
    assert "not a text log" in tab.summary.text()


def test_the_engine_frame_shows_that_releases_source_from_its_wheel(qwen_tab, tmp_path, monkeypatch):
    import zipfile

    lines = [f"# line {n}" for n in range(1, 5400)]
    lines[5381] = "        attn_backends = get_attn_backends_for_group(kv_cache_group_spec)"
    with zipfile.ZipFile(tmp_path / "vllm-0.10.2-cp38-abi3-manylinux1_x86_64.whl", "w") as zf:
        zf.writestr("vllm/v1/worker/gpu_model_runner.py", "\n".join(lines))
    monkeypatch.setenv("BRINGUP_ENGINE_SOURCES", str(tmp_path))
    qwen_tab.set_text(QWEN_PP_LOG, "pp.log")
    shown = qwen_tab.reading.source.toPlainText()
    assert "vllm 0.10.2" in shown and ">  5382          attn_backends = get_attn_backends_for_group" in shown
    assert " 5378  # line 5378" in shown
