"""The Layers tab's count says what is in view (issue 33 item 9: not "52 of 52 layers" over six rows)."""

from __future__ import annotations

from bringup.app.tabs.layers_tab import LayersTab
from tabs_helpers import NEMOTRON_NANO, layer_map


def test_the_count_names_the_rows_in_view_and_the_filters_matches(qtbot):
    tab = LayersTab()
    qtbot.addWidget(tab)
    tab.resize(900, 220)  # a short tab: a few rows show
    tab.show()
    qtbot.waitExposed(tab)
    tab.set_layer_map(layer_map(NEMOTRON_NANO))
    qtbot.waitUntil(lambda: "in view" in tab.count.text(), timeout=2000)
    assert tab.count.text().startswith("all 52 layers \u00b7 rows 1\u2013")
    tab.find.setText("attention")
    qtbot.waitUntil(lambda: tab.count.text().startswith("6 of 52 layers match"), timeout=2000)
    tab.resize(900, 700)  # all six fit: nothing to scroll
    qtbot.waitUntil(lambda: tab.count.text() == "6 of 52 layers match", timeout=2000)
