"""The exported report tells the truth (issue 33 item 4): the served model from /server_info with its
weights in words, the plan with its device and units, Diagnose's findings with their log lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.core.client.running_label import ServedModel
from gui_helpers import LAYER0_LOG as LOG
from repo_paths import REPO, SHARED_MODELS
from test_run_served_model import MINIATURE, NANO



@pytest.fixture
def window(qtbot, monkeypatch):
    from bringup.app import tabs as tab_registry
    from bringup.app.main_window import MainWindow

    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", ["bringup.app.tabs.plan_tab:PlanTab",
                                                        "bringup.app.tabs.run_tab:RunTab",
                                                        "bringup.app.tabs.diagnose_tab:DiagnoseTab"])
    w = MainWindow()
    qtbot.addWidget(w)
    w.resize(1440, 900)
    with qtbot.waitSignal(w.settled, timeout=10000):
        w.load(str(NANO))
    return w


def test_report_names_the_served_model_the_plans_device_and_the_logs_lines(window, tmp_path, qtbot):
    plan, run, diagnose = window.tab("Plan"), window.tab("Run"), window.tab("Diagnose")
    window.launch_state.update(target="sglang==0.5.23")
    b60 = next(i for i in range(plan.preset.count()) if "B60" in plan.preset.itemText(i))
    plan.preset.setCurrentIndex(b60)
    plan.replan()
    run._set_served(ServedModel.from_info(MINIATURE, "http://127.0.0.1:30001"))
    run._set_served(None)  # stopped: the report still names what ran
    diagnose.set_text(LOG, "crash.log")
    text = run.export_report(tmp_path / "r.html").read_text()
    assert "<h2>Served model</h2>" in text and "nemotron-3-nano-pattern-tiny-v1" in text
    assert "bundled miniature (random weights: text is noise)" in text and "Random weights: the answers" in text
    assert "Bring-up session: nemotron-3-nano-pattern-tiny-v1" in text  # not the 31.6 B model on the map
    assert "Intel Arc Pro B60 (xpu), 24.00 GiB" in text and "58.82 GiB (from the parameter count)" in text
    assert "--tp 4" in text  # the advice that would fit
    assert "line 5" in text and "layer_id=0 not in full attention layers" in text  # Diagnose's finding, its log line
    assert "Layer map" in text
    assert "active parameters" in text  # an MoE model's


def test_a_dense_models_report_has_no_empty_active_parameters_row(window, tmp_path, qtbot):
    with qtbot.waitSignal(window.settled, timeout=10000):
        window.load(str(SHARED_MODELS / "Qwen__Qwen3-8B.json"))
    text = window.tab("Run").export_report(tmp_path / "r.html").read_text()
    assert "Qwen3-8B" in text and "parameters" in text and "active parameters" not in text


def test_reports_are_saved_outside_the_checkout_and_confirmed_with_open(window, tmp_path):
    from bringup.app.run.report import report_name, reports_folder

    run = window.tab("Run")
    folder = reports_folder()
    assert REPO not in folder.resolve().parents and folder.resolve() != REPO
    assert report_name(run).startswith("bringup-nvidia-NVIDIA-Nemotron-3-Nano-30B-A3B-") and report_name(run).endswith(".html")
    box = run.confirm_report(tmp_path / "r.html")
    assert str(tmp_path / "r.html") in box.text()
    assert {b.text() for b in box.buttons()} >= {"Open", "Show folder"}
    box.close()
