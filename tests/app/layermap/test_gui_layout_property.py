"""Layout invariants of the layer map over random stacks, widths, folding and PP (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as hs
from PySide6.QtGui import QImage, QPainter

from bringup.app.layermap.highlight import Highlight
from bringup.app.layermap.layout import compute_layout
from bringup.app.layermap.paint import paint_map
from bringup.app.layermap.state import LayerMapState
from bringup.app.layermap.view import fold_by_stage
from bringup.core.layermap.vocabulary import FFNS, MIXERS, Layer, LayerMap


def make_map(kinds: list[tuple[str, str]], pp: int, mtp: int) -> LayerMap:
    per_stage = -(-len(kinds) // pp) if kinds else 1
    layers = tuple(Layer(index=i, mixer=m, ffn=f, pp_stage=min(i // per_stage, pp - 1)) for i, (m, f) in enumerate(kinds))
    mtp_layers = tuple(Layer(index=i, mixer="attention", ffn="moe") for i in range(mtp))
    return LayerMap(name="random", source="test", model_type="test", architecture="", family=None, layers=layers,
                    params_total=0, mtp_layers=mtp_layers, pp_size=pp)


stacks = hs.lists(hs.tuples(hs.sampled_from(MIXERS), hs.sampled_from(FFNS)), min_size=1, max_size=160)


@settings(max_examples=60, deadline=None)
@given(kinds=stacks, width=hs.integers(300, 2600), folded=hs.booleans(), pp=hs.integers(1, 4), mtp=hs.integers(0, 3))
def test_every_layer_gets_a_cell_inside_the_widget_and_none_overlap(qapp, kinds, width, folded, pp, mtp):
    layer_map = make_map(kinds, pp, mtp)
    folds = fold_by_stage(layer_map) if folded else None
    layout = compute_layout(layer_map, float(width), folds=folds)
    main = [c for c in layout.cells if c.key[0] == "layer"]
    covered = sorted(i for c in main for i in c.represents)
    assert covered == list(range(len(kinds)))
    if not folded:
        assert len(main) == len(kinds)
    assert len([c for c in layout.cells if c.key[0] == "mtp"]) == mtp
    rects = [c.rect for c in layout.cells]
    for i, a in enumerate(rects):
        assert a.left() >= 0 and a.right() <= layout.width + 0.5 and a.bottom() < layout.height
        assert not any(a.intersects(b) for b in rects[i + 1:])
    # Every cell is found again by hit-testing its centre.
    for cell in layout.cells:
        assert layout.cell_at(cell.mixer_rect.center()) is cell
    if pp > 1:
        assert {b.stage for b in layout.bands} == {l.pp_stage for l in layer_map.layers}
        for cell in main:  # a folded cell never spans two stages
            assert len({layer_map.layers[i].pp_stage for i in cell.represents}) == 1
    # And it paints, highlight included, without error.
    state = LayerMapState()
    state.set_layer_map(layer_map)
    state.set_highlight(Highlight(requested=[0], related=[len(kinds) - 1], message="x"))
    image = QImage(int(layout.width), int(layout.height), QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    paint_map(painter, layout, layer_map, state)
    painter.end()
