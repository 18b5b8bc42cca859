"""The Validate tab's device probe: real child processes; a crashing child leaves the tab working."""

from __future__ import annotations

import json

import pytest
from PySide6.QtGui import QGuiApplication

from bringup.app.tabs.validate_tab import ValidateTab
from tabs_helpers import NEMOTRON_NANO, layer_map

# The cheap steps: no torch import, so each probe takes a fraction of a second.
FAST_STEPS = ["python", "packages", "cpu"]


@pytest.fixture
def tab(qtbot):
    tab = ValidateTab(probe_on_show=False)
    qtbot.addWidget(tab)
    return tab


def _probe(tab, qtbot, **options):
    tab.probe_options = {"timeout": 30, "steps": FAST_STEPS, **options}
    with qtbot.waitSignal(tab.probe_finished, timeout=30000) as blocker:
        tab.start_probe()
    return blocker.args[0]


def test_probe_fills_the_checklist(tab, qtbot):
    report = _probe(tab, qtbot)
    assert [s.verdict for s in report.steps] == ["ok", "ok", "ok"]
    rows = tab.probe.steps()
    assert len(rows) == 3 and all(text.startswith("\u2713") for text, _ in rows)
    assert "cpu available" in tab.probe.status.text()
    assert tab.probe.button.isEnabled()
    tab.probe.copy_button.click()
    copied = json.loads(QGuiApplication.clipboard().text())
    assert [s["name"] for s in copied["steps"]] == FAST_STEPS and copied["devices"]["cpu"]["available"]


def test_crashing_probe_child_is_a_failed_step_and_the_tab_lives_on(tab, qtbot):
    report = _probe(tab, qtbot, simulate="crash:packages")
    verdicts = {s.name: s.verdict for s in report.steps}
    assert verdicts == {"python": "ok", "packages": "crashed", "cpu": "ok"}  # cpu ran in a fresh child
    rows = dict(tab.probe.steps())
    crashed = [text for text, tip in tab.probe.steps() if tip.endswith("crashed")]
    assert crashed and "packages" in crashed[0]
    assert "'packages' crashed" in tab.probe.status.text()
    assert "the window is unaffected" in tab.probe.status.text()
    assert len(rows) == 3
    # The tab still works: it validates, with the crash among the findings, and can probe again.
    tab.set_layer_map(layer_map(NEMOTRON_NANO))
    codes = [f["code"] for f in tab.findings.findings()]
    assert "PROBE_STEP_CRASHED" in codes
    crash = tab.findings.findings()[codes.index("PROBE_STEP_CRASHED")]
    assert "packages" in crash["message"] and crash["fix"]
    again = _probe(tab, qtbot)
    assert all(s.verdict == "ok" for s in again.steps)


def test_hung_probe_step_times_out(tab, qtbot):
    report = _probe(tab, qtbot, simulate="hang:cpu", timeout=3)  # a slow CI still starts the child in time
    assert report.step("cpu").verdict == "timeout"
    assert any("\u231b" in text for text, _ in tab.probe.steps())
    assert "'cpu' timeout" in tab.probe.status.text()
