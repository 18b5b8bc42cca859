"""The Validate tab includes the plan when a device's memory is chosen (issue 12)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from bringup.app.tabs.validate_tab import ValidateTab
from bringup.core.planner.device_presets import preset
from tabs_helpers import NEMOTRON_NANO, layer_map


@pytest.fixture
def tab(qtbot):
    tab = ValidateTab(probe_on_show=False)
    qtbot.addWidget(tab)
    tab.set_layer_map(layer_map(NEMOTRON_NANO))
    return tab


def _plan_codes(tab) -> list[str]:
    return [f["code"] for f in tab.findings.findings() if f["code"].startswith("PLAN_")]


def test_no_memory_no_plan_then_a_device_that_is_too_small(tab):
    tab.set_settings(target="sglang==0.5.23", device="xpu")
    tab.validate()
    assert _plan_codes(tab) == [] and tab.result.plan is None
    tab.set_settings(device_memory=preset("b60").memory_bytes)  # 24 GiB for a 59 GiB model
    tab.validate()
    assert _plan_codes(tab) == ["PLAN_WEIGHTS_DO_NOT_FIT"]
    assert "would fail" in tab.banner.text()
    (finding,) = [f for f in tab.findings.findings() if f["code"] == "PLAN_WEIGHTS_DO_NOT_FIT"]
    assert "Intel Arc Pro B60" in finding["message"] and "--tp" in finding["fix"]


def test_a_device_that_fits_shows_the_plans_numbers(tab):
    tab.set_settings(target="sglang==0.5.23", device="cuda", device_memory=preset("h200").memory_bytes)
    tab.validate()
    assert _plan_codes(tab) == ["PLAN_FITS"]
    assert tab.result.plan.max_running_requests > 0
    assert "nvidia-smi" in tab.memory.itemData(tab.memory.currentIndex(), Qt.ItemDataRole.ToolTipRole)  # its source


def test_vllm_is_a_target_with_its_own_plan(tab):
    assert "vllm==0.33.0" in [tab.target.itemText(i) for i in range(tab.target.count())]
    assert tab.target.currentText().startswith("sglang")  # the default stays the newest SGLang
    tab.set_settings(target="vllm==0.33.0", device="cuda", device_memory=preset("h200").memory_bytes)
    tab.validate()
    assert not tab.strategy.isEnabled() and tab.disable_radix.isEnabled()  # vLLM: prefix caching sets the mode
    assert _plan_codes(tab) == ["PLAN_FITS"]
    plan = tab.result.plan
    assert plan.target == "vllm==0.33.0" and plan.strategy == "align" and plan.max_running_requests > 0
