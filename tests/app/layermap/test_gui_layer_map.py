"""The layer map widget on real models: layout, tooltip, selection, folding, highlight, export."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtGui import QHelpEvent, QImage
from PySide6.QtWidgets import QToolTip

from bringup.app.layermap.highlight import Highlight
from bringup.app.layermap.layout import MIN_CELL
from bringup.app.layermap.panel import LayerMapPanel
from bringup.core.sources.resolve import load_layer_map

from gui_helpers import NANO, NANO_ATTENTION, NEMOTRON_H_56B, write_mtp_config


@pytest.fixture(scope="module")
def nano():
    return load_layer_map(NANO)


@pytest.fixture(scope="module")
def big():
    return load_layer_map(str(NEMOTRON_H_56B))


@pytest.fixture
def panel(qtbot):
    p = LayerMapPanel()
    qtbot.addWidget(p)
    p.resize(1440, 420)
    p.show()
    qtbot.waitExposed(p)
    return p


def test_nano_draws_one_cell_per_layer_with_attention_tags(panel, nano):
    panel.set_layer_map(nano)
    layout = panel.view.map_layout()
    assert [c.key for c in layout.cells] == [("layer", i) for i in range(52)]
    assert [int(c.tag) for c in layout.cells if c.tag] == NANO_ATTENTION
    assert len(layout.lines) == 1
    assert panel.view.height() == int(layout.height)


def test_118_layers_wrap_into_round_lines_and_stay_legible(panel, big):
    panel.set_layer_map(big)
    layout = panel.view.map_layout()
    assert len(layout.cells) == 118
    per_line = [sum(1 for c in layout.cells if c.line == n) for n in range(len(layout.lines))]
    assert per_line == [60, 58]
    assert layout.cell_w >= MIN_CELL
    right_edge = max(c.rect.right() for c in layout.cells)
    assert right_edge <= panel.view.width()
    rects = [c.mixer_rect for c in layout.cells]
    assert not any(a.intersects(b) for i, a in enumerate(rects) for b in rects[i + 1:])
    assert [int(c.tag) for c in layout.cells if c.tag] == [7, 18, 29, 40, 51, 62, 73, 84, 95, 106]


def test_hover_tooltip_names_pools_params_and_cache_bytes(panel, nano, qtbot):
    panel.set_layer_map(nano)
    view = panel.view
    mamba = view.tooltip_at(view.cell_center(2))
    assert mamba.splitlines()[0] == "Layer 2"
    assert "mixer: mamba2" in mamba and "state pool index: 1" in mamba and "KV pool index: —" in mamba
    assert "MiB per request (bf16 conv + fp32 SSM)" in mamba
    attention = view.tooltip_at(view.cell_center(12))
    assert "KV pool index: 1" in attention and "1 KiB per token (bf16)" in attention
    assert "params: 23.4 M" in attention
    # The real tooltip event path shows the same text.
    pos = view.cell_center(12)
    event = QHelpEvent(QEvent.Type.ToolTip, pos, view.mapToGlobal(pos))
    view.event(event)
    assert QToolTip.text() == attention
    # Moving the mouse marks the hovered cell in the state.
    qtbot.mouseMove(view, view.cell_center(7))
    qtbot.waitUntil(lambda: panel.state.hovered == ("layer", 7), timeout=1000)


def test_click_selects_and_details_show_the_layer(panel, nano, qtbot):
    panel.set_layer_map(nano)
    assert "Click a layer" in panel.details.text()
    qtbot.mouseClick(panel.view, Qt.MouseButton.LeftButton, pos=panel.view.cell_center(12))
    assert panel.state.selected == ("layer", 12)
    text = panel.details.text()
    assert "Layer 12" in text and "full attention" in text and "kv_heads" in text and "1 KiB" in text
    qtbot.keyClick(panel.view, Qt.Key.Key_Right)
    assert panel.state.selected == ("layer", 13)
    assert "Layer 13" in panel.details.text() and "experts" in panel.details.text()
    qtbot.mouseClick(panel.view, Qt.MouseButton.LeftButton, pos=QPoint(3, 3))  # empty space
    assert panel.state.selected is None


def test_fold_draws_each_unit_once_with_its_count(panel, big):
    panel.set_layer_map(big)
    unfolded = len(panel.view.map_layout().cells)
    panel.fold.setChecked(True)
    layout = panel.view.map_layout()
    assert len(layout.cells) < unfolded / 3
    covered = sorted(i for c in layout.cells for i in c.represents)
    assert covered == list(range(118))
    assert any(g.text.startswith("× ") for g in layout.groups)
    tip = panel.view.tooltip_at(panel.view.cell_center(7))
    assert "folded: also layers" in tip
    panel.fold.setChecked(False)
    assert len(panel.view.map_layout().cells) == unfolded


def _pixel(image: QImage, x: float, y: float):
    c = image.pixelColor(int(x), int(y))
    return c.red(), c.green(), c.blue()


def test_highlight_marks_requested_red_and_related_outlined(panel, nano, qtbot):
    panel.set_layer_map(nano)
    before = panel.view.map_layout().height
    panel.set_highlight(Highlight(requested=[0], related=NANO_ATTENTION,
                                  message="layer 0 is a Mamba2 layer; the KV pool holds 5, 12, 19, 26, 33, 42"))
    assert panel.clear_marks.isVisible()
    layout = panel.view.map_layout()
    assert layout.height > before  # room for the callout
    image = panel.view.grab().toImage()
    cell = layout.cell_of(("layer", 0))
    r, g, b = _pixel(image, cell.rect.center().x(), cell.rect.top() - 2.2)  # on the red outline
    assert r > 180 and g < 110 and b < 110
    cell1 = layout.cell_of(("layer", 1))
    r, g, b = _pixel(image, cell1.rect.center().x(), cell1.rect.top() - 2.2)  # not highlighted
    assert not (r > 180 and g < 110)
    assert panel.state.highlight_role(12) == "related" and panel.state.highlight_role(1) is None
    panel.clear_highlight()
    assert panel.state.highlight is None and panel.view.map_layout().height == before


def test_export_png_and_svg(panel, nano, tmp_path):
    panel.set_layer_map(nano)
    panel.state.select_layer(5)
    png = panel.view.export(tmp_path / "map.png", width=1000)
    image = QImage(str(png))
    assert image.width() == 2000 and image.height() > 200
    svg = panel.view.export(tmp_path / "map.svg", width=1000).read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and ">42<" in svg
    from bringup.core.errors import UserError

    with pytest.raises(UserError, match="png or .svg"):
        panel.view.export(tmp_path / "map.bmp")


def test_pp_stage_bands(panel):
    panel.set_layer_map(load_layer_map(NANO, pp=3))
    bands = panel.view.map_layout().bands
    assert sorted({b.stage for b in bands}) == [0, 1, 2]
    assert bands[0].text.startswith("PP 0 · layers 0–")


def test_mtp_blocks_are_drawn_apart(panel, tmp_path):
    layer_map = load_layer_map(str(write_mtp_config(tmp_path / "mtp-model")))
    panel.set_layer_map(layer_map)
    layout = panel.view.map_layout()
    mtp = [c for c in layout.cells if c.key[0] == "mtp"]
    main = [c for c in layout.cells if c.key[0] == "layer"]
    assert len(mtp) == 2 and len(main) == 52
    assert mtp[0].mixer_rect.left() - main[-1].mixer_rect.right() > 20  # a visible gap
    assert any(g.kind == "mtp" for g in layout.groups)
    assert "MTP block 0" in panel.view.tooltip_at(panel.view.cell_center(0, kind="mtp"))


def test_zoom_makes_cells_larger_and_wraps_more(panel, big, qtbot):
    panel.set_layer_map(big)
    before = panel.view.map_layout()
    panel.view.setFocus()
    qtbot.keyClick(panel.view, Qt.Key.Key_Plus, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(panel.view, Qt.Key.Key_Plus, Qt.KeyboardModifier.ControlModifier)
    after = panel.view.map_layout()
    assert after.cell_w > before.cell_w and len(after.lines) > len(before.lines)
    assert panel.view.height() == int(after.height)
    qtbot.keyClick(panel.view, Qt.Key.Key_0, Qt.KeyboardModifier.ControlModifier)
    assert panel.view.map_layout().cell_w == before.cell_w


def test_palette_letters_and_labels_are_readable():
    from bringup.app.layermap import style as st

    for mixer in st.MIXER_COLORS:
        if mixer != "none":
            colour = st.mixer_color(mixer)
            assert st.contrast(st.text_on(colour), colour) >= 4.2, mixer
    for colour in (st.TEXT, st.MUTED, st.ATTENTION_TAG, st.HIGHLIGHT):
        assert st.contrast(colour, st.BACKGROUND) >= 4.5
    assert "#d62828" not in {st.mixer_color(m).name() for m in st.MIXER_COLORS}  # red means a finding


def test_context_menu_copies_a_layers_details_and_folds(panel, nano):
    from PySide6.QtGui import QGuiApplication

    panel.set_layer_map(nano)
    actions = dict(panel.context_actions(panel.view.cell_center(19)))
    actions["Copy layer 19 details"]()
    assert QGuiApplication.clipboard().text().startswith("Layer 19\nmixer: attention")
    actions["Fold repeats"]()
    assert panel.state.folded and panel.fold.isChecked()
    assert "Unfold repeats" in dict(panel.context_actions(QPoint(2, 2)))


def test_kv_sharing_layers_are_hatched_and_say_whose_kv_they_read(panel):
    from bringup.app.layermap.facts import detail_rows, model_summary
    from bringup.app.layermap.paint import _legend_entries
    from bringup.core.families import build_layer_map

    from layermap_helpers import SHARING_TEXT

    layer_map = build_layer_map({"model_type": "gemma4", "text_config": SHARING_TEXT})
    panel.set_layer_map(layer_map)
    view = panel.view
    assert "reads layer 7's" in view.tooltip_at(view.cell_center(8))
    assert dict(detail_rows(layer_map.layers[11]))["KV cache"] == "reuses layer 5's (none of its own)"
    assert dict(model_summary(layer_map))["KV-sharing layers"] == "8–11"
    assert any(kind == "shared_kv" for kind, _, _ in _legend_entries(layer_map, panel.state))
    # The hatch: fewer pixels of a shared sliding cell keep the plain sliding colour than an ordinary one's.
    from bringup.app.layermap import style as st

    image = view.grab().toImage()
    cells = {c.key: c for c in view.map_layout().cells}
    fill = st.mixer_color("sliding_attention").name()

    def plain_share(index):
        r = cells[("layer", index)].mixer_rect.adjusted(3, 3, -3, -3)
        pixels = [image.pixelColor(x, y).name() for x in range(int(r.left()), int(r.right()))
                  for y in range(int(r.top()), int(r.bottom()))]
        return sum(p == fill for p in pixels) / len(pixels)

    assert plain_share(8) < 0.8 * plain_share(2)


def test_details_say_the_generic_path_read_the_map():
    pytest.importorskip("transformers")
    import transformers

    from bringup.app.layermap.facts import model_summary
    from bringup.core.families import build_layer_map

    cfg = transformers.AutoConfig.for_model("mimo_v2_flash", num_hidden_layers=6, hidden_size=128, num_attention_heads=4,
                                            num_key_value_heads=2, n_routed_experts=4, moe_intermediate_size=32,
                                            intermediate_size=256, vocab_size=300).to_dict()
    rows = model_summary(build_layer_map(cfg))
    assert dict(rows)["read by"].startswith("generic path: transformers")
    assert ("  layer kinds", "config.layer_types") in rows
