"""Validate's Numerics page: compare and check-kernels run as children in the background; the map is
told which block diverges first. Offscreen, with a tiny real checkpoint."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bringup.app.tabs.numerics_panel import NumericsPanel, error_colour
from bringup.app.tabs.validate_tab import ValidateTab

from engine_helpers import tiny_nemotron_h


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_nemotron_h(tmp_path_factory.mktemp("numerics-tab") / "tiny")


def test_compare_runs_in_the_background_colours_the_rows_and_marks_the_first_divergent_block(qtbot, checkpoint,
                                                                                           no_orphans):
    tab = ValidateTab(probe_on_show=False)
    qtbot.addWidget(tab)
    panel = tab.numerics
    panel.set_layer_map(SimpleNamespace(source=str(checkpoint)))
    highlights = []
    tab.highlight_requested.connect(highlights.append)
    with qtbot.waitSignal(panel.compare_finished, timeout=240000) as blocker:
        assert panel.start("compare", ["--perturb-layer", "3"])
        assert panel.runner.running and not panel.compare_button.isEnabled()  # the window goes on meanwhile
        assert not panel.start("check-kernels")  # one at a time
    doc = blocker.args[0]
    assert doc["first_divergent_layer"] == 3
    assert panel.table.rowCount() == 7
    assert panel.table.item(3, 2).background().color() == error_colour(1.0, 1e-3)  # beyond tolerance: red
    assert panel.table.item(0, 2).background().color() == error_colour(0.0, 1e-3)
    assert highlights and highlights[-1].requested == [3]
    assert "block 3 (mamba2) first exceeds" in highlights[-1].message
    assert panel.compare_button.isEnabled()


def test_a_failed_run_is_said_in_the_panel(qtbot):
    panel = NumericsPanel()
    qtbot.addWidget(panel)
    panel.set_layer_map(SimpleNamespace(source="/nonexistent/model/folder"))
    with qtbot.waitSignal(panel.kernels_finished, timeout=60000):
        panel.start("check-kernels")
    assert panel.status.text().startswith("check-kernels failed:") and "no such folder" in panel.status.text()
