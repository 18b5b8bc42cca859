"""The three tabs inside the real main window: a finding clicked in a tab marks the layer map."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from bringup.app import tabs as tab_registry
from bringup.app.main_window import MainWindow
from bringup.app.tabs.validate_tab import ValidateTab
from tabs_helpers import LAYER0_CRASH_LOG, NEMOTRON_NANO

NANO_ATTENTION = [5, 12, 19, 26, 33, 42]
OURS = ["bringup.app.tabs.validate_tab:ValidateTab", "bringup.app.tabs.plan_tab:PlanTab",
        "bringup.app.tabs.diagnose_tab:DiagnoseTab"]


@pytest.fixture
def window(qtbot, monkeypatch):
    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", OURS)
    # The probe's cheap steps only: no torch import in tests.
    monkeypatch.setattr(ValidateTab, "PROBE_OPTIONS", {"steps": ["python", "cpu"], "timeout": 30})
    w = MainWindow()
    qtbot.addWidget(w)
    w.resize(1440, 900)
    w.show()
    qtbot.waitExposed(w)
    with qtbot.waitSignal(w.settled, timeout=10000):
        w.load(str(NEMOTRON_NANO))
    yield w
    w.tab("Validate").probe_runner.stop()
    w.loader.wait()


def test_every_tab_got_the_model(window):
    assert [t.title for t in window.tab_widgets()] == ["Validate", "Plan", "Diagnose"]
    assert window.tab("Plan").plan.kv_bytes_per_token == 6144
    assert window.tab("Validate").result is not None


def test_validate_and_plan_edit_the_windows_one_launch_state(window):
    validate, plan = window.tab("Validate"), window.tab("Plan")
    assert validate.state is window.launch_state and plan.state is window.launch_state
    validate.device.setCurrentText("cpu")
    assert plan.device.currentText() == "cpu" and window.launch_state["device"] == "cpu"


def test_diagnose_log_opened_through_the_window_marks_layer_0(window, tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(LAYER0_CRASH_LOG)
    assert window.open_tab("Diagnose", str(log)) == ""
    highlight = window.map_panel.state.highlight
    assert highlight.requested == [0] and highlight.related == NANO_ATTENTION
    # Dropping a log on the window (here: on the Plan tab) opens it in Diagnose too.
    window.tabs.setCurrentWidget(window.tab("Plan"))
    window.tab("Diagnose").clear()
    assert window.map_panel.state.highlight is None
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(log))])
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                      Qt.KeyboardModifier.NoModifier)
    assert window.tab("Diagnose")._window_filter.eventFilter(window, drop)
    assert window.tabs.currentWidget() is window.tab("Diagnose")
    assert window.map_panel.state.highlight.requested == [0]


def test_validate_finding_marks_the_map_and_the_probe_runs_when_shown(window, qtbot):
    validate = window.tab("Validate")  # the first tab: shown, so it probes
    if validate.probe_report is None:
        qtbot.waitSignal(validate.probe_finished, timeout=30000).wait()
    assert "cpu available" in validate.probe.status.text()
    validate.set_settings(target="sglang==0.5.17", device="xpu")
    validate.validate()
    codes = [f["code"] for f in validate.findings.findings()]
    assert "DEVICE_NOT_ON_THIS_MACHINE" in codes  # the probe found no XPU here
    validate.findings.select(codes.index("TRITON_LAYER0_PROBE"))
    highlight = window.map_panel.state.highlight
    assert highlight.requested == [0] and highlight.related == NANO_ATTENTION
    validate.findings.select(codes.index("EXTRA_BUFFER_PLATFORM"))  # names no layer
    assert window.map_panel.state.highlight is None


def test_the_engine_the_run_tab_starts_is_the_compare_tabs_server_a(qtbot, monkeypatch):
    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", ["bringup.app.tabs.run_tab:RunTab",
                                                        "bringup.app.tabs.compare_tab:CompareTab"])
    w = MainWindow(remember=False)
    qtbot.addWidget(w)
    w.build_tabs()
    compare = w.tab("Compare")
    w.tab("Run").controller.ready.emit("http://127.0.0.1:41234")
    assert compare.url_a.text() == "http://127.0.0.1:41234"
    compare.url_a.setText("http://gpu-box:8000")  # the user's own A is kept
    w.tab("Run").controller.ready.emit("http://127.0.0.1:41235")
    assert compare.url_a.text() == "http://gpu-box:8000"
