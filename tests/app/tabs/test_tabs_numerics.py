"""The Numerics tab: compare and check-kernels run as children in the background; the map is
told which block diverges first. Offscreen, with a tiny real checkpoint."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bringup.app.layermap.panel import LayerMapPanel
from bringup.app.layermap.style import ERROR_COLORS
from bringup.app.tabs.numerics_panel import NumericsPanel, error_colour
from bringup.app.tabs.numerics_tab import NumericsTab
from bringup.core.session_report import SessionRecord, render_html
from bringup.core.sources.resolve import load_layer_map

from engine_helpers import tiny_nemotron_h
from gui_helpers import cell_colour


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_nemotron_h(tmp_path_factory.mktemp("numerics-tab") / "tiny")


def test_compare_runs_in_the_background_colours_the_rows_and_marks_the_first_divergent_block(qtbot, checkpoint,
                                                                                           no_orphans):
    tab = NumericsTab()
    qtbot.addWidget(tab)
    panel = tab
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

    # The map itself, coloured by each block's error: what the window's map shows on this highlight.
    map_panel = LayerMapPanel()
    qtbot.addWidget(map_panel)
    map_panel.resize(900, 360)
    map_panel.show()
    qtbot.waitExposed(map_panel)
    map_panel.set_layer_map(load_layer_map(str(checkpoint)))
    map_panel.set_highlight(highlights[-1])
    assert cell_colour(map_panel, 0) == ERROR_COLORS["ok"] and cell_colour(map_panel, 3) == ERROR_COLORS["beyond"]
    assert map_panel.state.highlight_role(3) == "requested"

    # The exported report carries the comparison.
    section = tab.report_section()["numerics"]
    assert section["compare"] == doc
    page = render_html(SessionRecord(numerics=section))
    assert "<h2>Block comparison</h2>" in page and "block 3 first exceeds the tolerance" in page
    assert f"background:{ERROR_COLORS['beyond']}" in page and f"background:{ERROR_COLORS['ok']}" in page


def test_an_sglang_dump_folder_is_compared_from_the_page(qtbot, checkpoint, tmp_path, no_orphans):
    from bringup.core.numerics.capture import capture

    from sglang_dump_helpers import PassSpec, write_sglang_dump

    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(checkpoint).encode("A prompt an SGLang server dumped its layers for.")
    run = capture(str(checkpoint), device="cpu", dtype="bfloat16", sequences=[ids], perturb_layer=3, log=lambda m: None)
    write_sglang_dump(tmp_path / "dump", [PassSpec(run, [ids])], checkpoint)
    panel = NumericsPanel()
    qtbot.addWidget(panel)
    panel.set_layer_map(SimpleNamespace(source=str(checkpoint)))
    highlights = []
    panel.highlight_requested.connect(highlights.append)
    assert not panel.compare_dump()  # no folder given: said, nothing started
    assert "Give the folder" in panel.status.text()
    panel.dump_folder.setText(str(tmp_path / "dump"))
    with qtbot.waitSignal(panel.compare_finished, timeout=240000) as blocker:
        assert panel.compare_dump()
    doc = blocker.args[0]
    assert doc["device"] == "SGLang dump pass 0" and doc["first_divergent_layer"] == 3
    assert panel.status.text().startswith("SGLang dump pass 0: block 3 (mamba2) first exceeds")
    assert highlights[-1].requested == [3] and dict(highlights[-1].errors)[3] > doc["tolerance"]
    assert panel.table.item(2, 5).text() != "" and panel.table.item(1, 5).text() == ""  # flips: MoE blocks only


def test_a_failed_run_is_said_in_the_panel(qtbot):
    panel = NumericsPanel()
    qtbot.addWidget(panel)
    panel.set_layer_map(SimpleNamespace(source="/nonexistent/model/folder"))
    with qtbot.waitSignal(panel.kernels_finished, timeout=60000):
        panel.start("check-kernels")
    assert panel.status.text().startswith("check-kernels failed:") and "no such folder" in panel.status.text()
    assert panel.report_section() == {"numerics": {}}  # nothing ran to completion: nothing for the report


def test_the_kernel_count_tells_device_kernels_from_the_reference_run_on_the_device(qtbot):
    tab = NumericsTab()
    qtbot.addWidget(tab)
    rows = [{"name": "mamba_chunk_scan", "phase": "prefill", "implementation": "triton", "dtype": "bfloat16",
             "max_rel_err": 2e-3, "max_abs_err": 1e-3, "tolerance": 1e-2, "ok": True},
            {"name": "rms_norm", "phase": "decode", "implementation": "reference", "dtype": "bfloat16",
             "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-2, "ok": True},
            {"name": "silu_mul", "phase": "decode", "implementation": "reference", "dtype": "bfloat16",
             "max_rel_err": 0.0, "max_abs_err": 0.0, "tolerance": 1e-2, "ok": True}]
    tab._done("check-kernels", {"ok": True, "device": "xpu", "kernels": rows, "findings": []})
    assert tab.status.text().startswith("1 device kernel pass on xpu; 2 more rows (grey) run the plain reference")
    assert "proves nothing" in tab.table.item(1, 0).toolTip() and not tab.table.item(0, 0).toolTip()
    page = render_html(SessionRecord(numerics=tab.report_section()["numerics"]))
    assert "1 device kernels pass; 2 rows run the plain reference" in page
