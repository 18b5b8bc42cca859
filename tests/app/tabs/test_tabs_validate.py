"""The Validate tab on real configs: settings re-validate, findings name layers, matrix and command."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QGuiApplication, QMouseEvent
from PySide6.QtWidgets import QApplication

from bringup.app.tabs.validate_tab import ValidateTab
from bringup.core.validate.validate import validate as core_validate
from bringup.core.rules.settings import LaunchSettings
from tabs_helpers import LFM2, NEMOTRON_NANO, layer_map

NANO_ATTENTION = [5, 12, 19, 26, 33, 42]


@pytest.fixture
def tab(qtbot):
    tab = ValidateTab(probe_on_show=False)
    qtbot.addWidget(tab)
    tab.resize(1300, 600)
    tab.set_layer_map(layer_map(NEMOTRON_NANO))
    return tab


def codes(tab) -> list[str]:
    return [f["code"] for f in tab.findings.findings()]


def test_pr_32227_launch_fails_with_both_crashes(tab, qtbot):
    tab.set_settings(target="sglang==0.5.17", device="xpu")
    qtbot.waitUntil(lambda: tab.result is not None and tab.result.target.label == "sglang==0.5.17", timeout=2000)
    assert {"EXTRA_BUFFER_PLATFORM", "TRITON_LAYER0_PROBE"} <= set(codes(tab))
    assert "would fail" in tab.banner.text()
    assert tab.resolved.value("mamba_strategy").startswith("extra_buffer")
    assert tab.resolved.value("attention_backend").startswith("triton")
    # The same answer as the rules give on their own.
    expected = core_validate(layer_map(NEMOTRON_NANO), "sglang==0.5.17", LaunchSettings(device="xpu"))
    assert set(codes(tab)) == {f.code for f in expected.findings}


def test_clicking_the_layer0_finding_highlights_layer_0_and_the_attention_layers(tab, qtbot):
    tab.set_settings(target="sglang==0.5.17", device="xpu")
    tab.validate()
    row = codes(tab).index("TRITON_LAYER0_PROBE")
    with qtbot.waitSignal(tab.highlight_requested) as blocker:
        tab.findings.select(row)
    highlight = blocker.args[0]
    assert highlight.requested == [0]
    assert highlight.related == NANO_ATTENTION
    assert highlight.severity == "error"
    assert "dict_keys([5, 12, 19, 26, 33, 42])" in tab.findings.details.toPlainText()


def test_changing_settings_updates_findings_after_the_debounce(tab, qtbot):
    tab.set_settings(target="sglang==0.5.17", device="xpu")
    tab.validate()
    assert "TRITON_LAYER0_PROBE" in codes(tab)
    tab.backend.setCurrentText("intel_xpu")  # the fix the finding suggests
    tab.disable_radix.setChecked(True)
    qtbot.waitUntil(lambda: "TRITON_LAYER0_PROBE" not in codes(tab), timeout=2000)
    assert "EXTRA_BUFFER_PLATFORM" not in codes(tab)
    assert "would fail" not in tab.banner.text()
    command = tab.command.command()
    assert command.startswith("python -m sglang.launch_server")
    assert "--attention-backend intel_xpu" in command and "--disable-radix-cache" in command
    tab.command.copy()
    assert QGuiApplication.clipboard().text() == command


def test_matrix_cells_and_choosing_one(tab, qtbot):
    tab.set_settings(target="sglang==0.5.23", device="xpu")
    tab.validate()
    cells = {(c["device"], c["strategy"], c["backend"]): c["verdict"] for c in tab.grid.cells()}
    assert cells[("xpu", "disabled", "intel_xpu")] == "ok"
    assert cells[("xpu", "extra_buffer", "default")] == "failure"  # 0.5.21+ refuses extra_buffer on XPU
    assert tab.grid.device_order()[0] == "xpu"  # the form's device comes first
    assert tab.grid.current == ("xpu", "auto", "default")
    tab.show()
    qtbot.waitExposed(tab)
    tab.side.setCurrentIndex(0)
    rect = tab.grid.rect_of("xpu", "disabled", "intel_xpu")
    assert rect is not None
    centre = rect.center()
    move = QMouseEvent(QEvent.Type.MouseMove, centre, tab.grid.mapToGlobal(centre), Qt.MouseButton.NoButton,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(tab.grid, move)  # hover: the cell's tooltip
    assert tab.grid._hover["backend"] == "intel_xpu"
    assert not tab.grab().isNull()  # every painter in the tab runs
    with qtbot.waitSignal(tab.grid.cell_chosen):
        qtbot.mouseClick(tab.grid, Qt.MouseButton.LeftButton, pos=rect.center().toPoint())
    qtbot.waitUntil(lambda: tab.settings()["disable_radix_cache"], timeout=2000)
    assert tab.settings()["attention_backend"] == "intel_xpu"
    qtbot.waitUntil(lambda: tab.result.verdict == "ok", timeout=2000)
    assert "should work" in tab.banner.text()


def test_lfm2_refuses_triton_and_bad_input_is_a_message(tab, qtbot):
    tab.set_layer_map(layer_map(LFM2))
    tab.set_settings(target="sglang==0.5.23", device="cuda", attention_backend="triton")
    tab.validate()
    assert any("triton" in (f.get("engine_message") or "") for f in tab.findings.findings())
    tab.target.setEditText("sglang==banana")
    tab.validate()
    assert tab.result is None
    assert "sglang==X.Y.Z" in tab.banner.text()
    assert tab.command.command() == ""


def test_no_model(tab):
    tab.set_layer_map(None)
    assert tab.result is None and tab.grid.cells() == []
    assert "Load a model" in tab.banner.text()


def test_embedded_target_greys_out_sglang_only_settings(tab, qtbot):
    tab.set_settings(target="sglang==0.5.23", attention_backend="triton", mamba_strategy="no_buffer")
    tab.set_settings(target="embedded", device="cpu")
    assert not tab.backend.isEnabled() and not tab.strategy.isEnabled() and not tab.disable_radix.isEnabled()
    tab.validate()
    assert tab.result.target.engine == "embedded"
    assert tab.command.command().startswith("bringup serve")
    assert "EMBEDDED_BACKEND_IGNORED" not in codes(tab)  # the greyed-out triton is not sent
    tab.tp.setValue(2)
    tab.validate()
    assert "EMBEDDED_PARALLEL" in codes(tab)
    assert {c["device"] for c in tab.grid.cells()} == {"cpu", "cuda", "xpu"}
    tab.set_settings(target="sglang==0.5.23")
    assert tab.backend.isEnabled() and tab.settings()["attention_backend"] == "triton"  # kept


def test_a_catalogue_model_launches_from_its_hub_id(qtbot):
    from bringup.core.sources.catalogue import DEFAULT_MODEL, find
    from bringup.core.sources.resolve import load_layer_map

    tab = ValidateTab(probe_on_show=False)
    qtbot.addWidget(tab)
    tab.set_layer_map(load_layer_map(DEFAULT_MODEL))  # source: the catalogue's short name
    assert f"--model-path {find(DEFAULT_MODEL).hub_id} " in tab.command.command() + " "


def test_layer_finding_details_say_what_the_layers_are(tab):
    tab.set_settings(target="sglang==0.5.17", device="xpu")
    tab.validate()
    tab.findings.select(codes(tab).index("TRITON_LAYER0_PROBE"))
    details = tab.findings.details.toPlainText()
    assert "Requested layer" in details and "mamba2 (ffn none)" in details
    assert "5, 12, 19, 26, 33, 42 (attention)" in details


def test_a_bug_in_the_rules_is_shown_not_raised(tab, monkeypatch, capsys):
    import bringup.app.tabs.validate_logic as logic

    def broken(*_args, **_kwargs):
        raise KeyError("mamba_ratio")

    monkeypatch.setattr(logic, "validate", broken)
    tab.validate()
    assert "bug in the workbench" in tab.banner.text() and "KeyError" in tab.banner.text()
    assert tab.result is None and tab.command.command() == ""
    assert "Traceback" in capsys.readouterr().err  # for the bug report, on stderr
