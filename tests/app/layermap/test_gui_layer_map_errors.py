"""The layer map coloured by a comparison's relative error (offscreen): each block's cell in its error
band's colour, folded units in their worst block's, blocks not compared in grey, the first divergent
block still marked, and the legend giving the scale."""

from __future__ import annotations

import pytest

from bringup.app.layermap.highlight import Highlight
from bringup.app.layermap.paint import _legend_entries
from bringup.app.layermap.panel import LayerMapPanel
from bringup.app.layermap.style import ERROR_COLORS
from bringup.app.tabs.numerics_panel import compare_highlight
from bringup.core.sources.resolve import load_layer_map

from gui_helpers import NANO
from gui_helpers import cell_colour


@pytest.fixture
def panel(qtbot):
    p = LayerMapPanel()
    qtbot.addWidget(p)
    p.resize(1440, 420)
    p.show()
    qtbot.waitExposed(p)
    return p


def nano_compare(layer_map, errors: dict[int, float | None], tolerance=5e-2) -> dict:
    """A compare document (the `bringup compare --json` shape) over Nano's blocks."""
    layers = [{"index": l.index, "mixer": l.mixer, "ffn": l.ffn, "rel_err": errors.get(l.index, 1e-3),
               "max_abs_err": 0.0, "routing_flips": None} for l in layer_map.layers]
    first = next((i for i, v in sorted(errors.items()) if v is not None and not v <= tolerance), None)
    findings = [] if first is None else [{"code": "BLOCK_DIVERGES", "severity": "error", "layers": [first],
                                           "message": f"block {first} first exceeds {tolerance:.0e}"}]
    return {"tolerance": tolerance, "first_divergent_layer": first, "layers": layers, "findings": findings}


def test_each_block_is_filled_with_its_error_band_and_the_first_divergent_one_is_marked(panel):
    nano = load_layer_map(NANO)
    panel.set_layer_map(nano)
    plain = cell_colour(panel, 1)  # a Mamba2 block in its kind's colour
    doc = nano_compare(nano, {1: 1e-3, 2: 3e-2, 5: 0.4, 7: float("nan"), 9: None})
    panel.set_highlight(compare_highlight(doc))
    assert cell_colour(panel, 1) == ERROR_COLORS["ok"] != plain
    assert cell_colour(panel, 2) == ERROR_COLORS["near"]
    assert cell_colour(panel, 5) == ERROR_COLORS["beyond"]  # the attention block 5, first beyond 5e-2
    assert cell_colour(panel, 7) == ERROR_COLORS["beyond"]  # NaN
    assert cell_colour(panel, 9) == ERROR_COLORS["none"]  # not compared (a block a dump does not hold)
    assert panel.state.highlight_role(5) == "requested"
    keys = [key for kind, key, _ in _legend_entries(nano, panel.state) if kind in ("error", "mark")]
    assert keys == ["ok", "near", "beyond", "none", "requested"]
    panel.clear_highlight()
    assert cell_colour(panel, 1) == plain


def test_a_folded_unit_shows_its_worst_block():
    h = Highlight(errors=((0, 1e-3), (1, 0.2), (2, None)), tolerance=5e-2)
    assert h.error_of((0, 1, 2)) == (True, 0.2)
    assert h.error_of((2,)) == (False, None)
    compared, worst = Highlight(errors=((0, 1e-3), (1, float("nan"))), tolerance=5e-2).error_of((0, 1))
    assert compared and worst != worst
