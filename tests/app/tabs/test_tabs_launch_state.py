"""Validate, Plan and Run share one LaunchState (issue 26 item 6): what Validate approved is what
Plan plans and Run starts."""

from __future__ import annotations

import pytest

from bringup.app.launch_state import LaunchState
from bringup.app.tabs import TAB_FACTORIES, load_factory
from bringup.app.tabs.contract import SharesLaunchSettings, Tab
from bringup.app.tabs.plan_tab import PlanTab
from bringup.app.tabs.run_tab import RunTab
from bringup.app.tabs.validate_tab import ValidateTab
from bringup.core.planner.device_presets import preset
from tabs_helpers import NEMOTRON_NANO, layer_map


@pytest.fixture
def tabs(qtbot):
    state = LaunchState()
    validate, plan, run = ValidateTab(probe_on_show=False), PlanTab(), RunTab()
    for tab in (validate, plan, run):
        qtbot.addWidget(tab)
        tab.set_launch_state(state)
        tab.set_layer_map(layer_map(NEMOTRON_NANO))
    return state, validate, plan, run


def test_a_device_chosen_in_validate_is_planned_and_started(tabs, qtbot):
    state, validate, plan, run = tabs
    validate.device.setCurrentText("cuda")  # as a user picks it
    assert state["device"] == "cuda" and plan.device.currentText() == "cuda"
    qtbot.waitUntil(lambda: plan.plan is not None and plan.plan.device == "cuda", timeout=2000)
    validate.validate()
    assert state.result is validate.result and state.result.settings.device == "cuda"
    launch = run.next_launch()
    assert launch.settings == state.result.settings  # Run starts what Validate approved
    assert launch.run_device == "cuda" and run.device.currentText() == "cuda"


def test_plans_device_size_is_what_validate_checks(tabs, qtbot):
    state, validate, plan, _run = tabs
    b60 = next(i for i in range(plan.preset.count()) if "B60" in plan.preset.itemText(i))
    plan.preset.setCurrentIndex(b60)  # a 24 GiB XPU: Nemotron-3-Nano's 59 GiB of weights do not fit
    assert state["device_memory"] == preset("b60").memory_bytes and state["device"] == "xpu"
    assert validate.memory.currentData() == preset("b60").memory_bytes
    validate.validate()
    assert "PLAN_WEIGHTS_DO_NOT_FIT" in [f.code for f in validate.result.findings]
    assert validate.result.plan.device_memory == plan.settings()["device_memory"]


def test_a_change_in_plan_shows_in_validate_and_stales_the_approval(tabs, qtbot):
    state, validate, plan, _run = tabs
    validate.validate()
    assert state.launch is not None
    with qtbot.waitSignal(state.validated) as stale:
        plan.tp.setValue(2)
    assert stale.args == [None] and state.launch is None  # approved settings no longer hold
    assert validate.tp.value() == 2
    validate.validate()
    assert state.launch.settings.tp == 2


def test_unknown_settings_are_refused_by_name():
    with pytest.raises(KeyError, match="unknown launch setting 'devce'"):
        LaunchState().update(devce="xpu")


def test_every_registered_tab_keeps_the_contract(qtbot):
    shared = set()
    for spec in TAB_FACTORIES:
        tab = load_factory(spec)()
        qtbot.addWidget(tab)
        assert isinstance(tab, Tab) and isinstance(tab.title, str), spec
        if isinstance(tab, SharesLaunchSettings):
            shared.add(tab.title)
    assert {"Validate", "Plan", "Run"} <= shared
