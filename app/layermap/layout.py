"""Where every cell of the layer map goes, for a given width: pure geometry, no painting.

Painting, hit-testing (hover, click) and export all read the same `MapLayout`, so what is drawn is
what is clicked. Layers run left to right in lines; when one line would make cells too narrow the
strip wraps into lines of a round number of layers (60 for a 118-layer Nemotron-H), so 100+ layers
stay legible. Folded, each repeated unit is drawn once with its repeat count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from PySide6.QtCore import QPointF, QRectF

from bringup.core.layermap.vocabulary import Fold, Layer, LayerMap

MARGIN = 14
GUTTER = 50  # row names ("mixer", "ffn") on the left
HEADER_H = 42  # two lines: what the layers are, what they cache
GROUP_H = 17  # "× 5" over a folded unit, "MTP" over the MTP blocks
TAG_H = 17  # full-attention index tags
MIXER_H = 34
ROW_GAP = 3
FFN_H = 16
INDEX_H = 15
BAND_H = 15
LINE_GAP = 12
FOOTER_GAP = 6
CALLOUT_H = 20
LEGEND_H = 22
MIN_CELL = 17.0
MAX_CELL = 40.0
SEGMENT_GAP = 10.0
MTP_GAP = 26.0
MAX_TAGS = 16  # more full-attention layers than this (dense models): no per-layer tags


@dataclass
class CellBox:
    key: tuple[str, int]  # ("layer" | "mtp", index)
    layer: Layer
    represents: tuple[int, ...]  # the layer indices this cell stands for (several when folded)
    line: int
    mixer_rect: QRectF
    ffn_rect: QRectF
    label: str | None  # index text under the cell, None when skipped for room
    tag: str | None  # full-attention index tag above the cell

    @property
    def rect(self) -> QRectF:
        return self.mixer_rect.united(self.ffn_rect)


@dataclass
class GroupBox:
    rect: QRectF  # the label row above the group's cells
    text: str
    kind: str  # "fold" | "mtp"


@dataclass
class LineBox:
    top: float
    group_y: float
    tag_y: float
    mixer_y: float
    ffn_y: float
    index_y: float
    band_y: float
    bottom: float


@dataclass
class BandBox:
    rect: QRectF
    stage: int
    text: str


@dataclass
class MapLayout:
    width: float
    height: float
    cell_w: float
    cells: list[CellBox] = field(default_factory=list)
    groups: list[GroupBox] = field(default_factory=list)
    lines: list[LineBox] = field(default_factory=list)
    bands: list[BandBox] = field(default_factory=list)
    callout_y: float = 0.0
    legend_y: float = 0.0
    has_groups: bool = False
    has_bands: bool = False

    def cell_at(self, point: QPointF) -> CellBox | None:
        for cell in self.cells:
            if cell.rect.adjusted(-1, -1, 1, 1).contains(point):
                return cell
        return None

    def cell_of(self, key: tuple[str, int]) -> CellBox | None:
        """The cell showing a layer (when folded, the cell that stands for it)."""
        kind, index = key
        for cell in self.cells:
            if cell.key[0] == kind and index in cell.represents:
                return cell
        return None


@dataclass
class _Item:
    key: tuple[str, int]
    layer: Layer
    represents: tuple[int, ...]
    gap_before: float
    group: int | None  # index into the segment list, for folded units and MTP


def _items(layer_map: LayerMap, folds: list[Fold] | None) -> tuple[list[_Item], list[tuple[str, str]]]:
    """The cells in drawing order, and (kind, label) for each group."""
    items: list[_Item] = []
    groups: list[tuple[str, str]] = []
    by_index = {l.index: l for l in layer_map.layers}
    if folds:
        covered: set[int] = set()
        for fold in sorted(folds, key=lambda f: f.start):
            width = len(fold.unit)
            group = None
            if fold.times > 1:
                groups.append(("fold", f"× {fold.times}   {fold.start}–{fold.stop - 1}"))
                group = len(groups) - 1
            for j in range(width):
                reps = tuple(fold.start + j + k * width for k in range(fold.times))
                first = by_index.get(reps[0])
                if first is None:
                    continue
                items.append(_Item(("layer", first.index), first, reps, 0.0, group))
                covered.update(reps)
        # Layers the folds leave out still get their own cell, in order.
        for layer in layer_map.layers:
            if layer.index not in covered:
                items.append(_Item(("layer", layer.index), layer, (layer.index,), 0.0, None))
        items.sort(key=lambda it: it.represents[0])
        for prev, it in zip(items, items[1:]):
            it.gap_before = SEGMENT_GAP if it.group != prev.group else 0.0
    else:
        items = [_Item(("layer", l.index), l, (l.index,), 0.0, None) for l in layer_map.layers]
    if layer_map.mtp_layers:
        groups.append(("mtp", "MTP"))
        for j, layer in enumerate(layer_map.mtp_layers):
            items.append(_Item(("mtp", layer.index), layer, (layer.index,), MTP_GAP if j == 0 else 0.0, len(groups) - 1))
    return items, groups


def _cell_width(items: list[_Item], avail: float, main_count: int, folded: bool, zoom: float) -> float:
    min_cell, max_cell = MIN_CELL * zoom, MAX_CELL * zoom
    gaps = sum(it.gap_before for it in items)
    fit = (avail - gaps) / max(1, len(items))
    if fit >= min_cell:
        return min(max_cell, fit)
    if folded:
        return min(min_cell, max(MIN_CELL * 0.8, avail / max(1, len(items))))
    # Wrap into lines of a round number of layers so indices line up from line to line.
    lines = math.ceil(main_count * min_cell / avail)
    per_line = math.ceil(main_count / lines)
    step = 10 if per_line >= 20 else 1
    per_line = math.ceil(per_line / step) * step
    while per_line * min_cell > avail and per_line > step:
        per_line -= step
    return min(max_cell, max(MIN_CELL * 0.8, avail / per_line))


def _label_step(cell_w: float, text_width: Callable[[str], float], max_index: int) -> int:
    needed = text_width(str(max(max_index, 9))) + 4
    for step in (1, 2, 5, 10, 20):
        if step * cell_w >= needed:
            return step
    return 50


def compute_layout(
    layer_map: LayerMap,
    width: float,
    *,
    folds: list[Fold] | None = None,
    text_width: Callable[[str], float] = lambda s: 6.5 * len(s),
    callout: bool = False,
    zoom: float = 1.0,
) -> MapLayout:
    """Place every cell for a widget `width` pixels wide. `folds` given: draw folded.
    `zoom` scales the cells (wider cells wrap into more lines; taller up to 1.5x)."""
    width = max(width, GUTTER + 2 * MARGIN + 8 * MIN_CELL)
    tall = min(max(zoom, 1.0), 1.5)
    mixer_h, ffn_h = MIXER_H * tall, FFN_H * tall
    items, group_specs = _items(layer_map, folds)
    x0 = MARGIN + GUTTER
    avail = width - x0 - MARGIN
    folded = bool(folds)
    cell_w = _cell_width(items, avail, layer_map.num_layers, folded, zoom)
    has_groups = bool(group_specs)
    has_bands = layer_map.pp_size > 1
    full_attention = set(layer_map.full_attention_layers)
    tags_on = 0 < len(full_attention) <= MAX_TAGS and len(full_attention) * 2 <= max(1, layer_map.num_layers)
    step = 1 if folded else _label_step(cell_w, text_width, layer_map.num_layers - 1)

    # First pass: which line each item goes on, and its x.
    placed: list[tuple[_Item, int, float]] = []
    line, x = 0, x0
    group_width: dict[int, float] = {}
    for it in items:
        if it.group is not None:
            group_width[it.group] = group_width.get(it.group, 0.0) + cell_w
    seen_group: set[int] = set()
    for it in items:
        gap = it.gap_before if x > x0 else 0.0
        right = x0 + avail + 0.5
        overflows = x + gap + cell_w > right
        # Keep a folded unit or the MTP blocks together when the whole group fits on a line.
        if it.group is not None and it.group not in seen_group:
            whole = group_width[it.group]
            overflows = overflows or (x + gap + whole > right and whole <= avail)
        if overflows and x > x0:
            line, x, gap = line + 1, x0, 0.0
        if it.group is not None:
            seen_group.add(it.group)
        x += gap
        placed.append((it, line, x))
        x += cell_w

    # Second pass: vertical geometry per line.
    layout = MapLayout(width=width, height=0.0, cell_w=cell_w, has_groups=has_groups, has_bands=has_bands)
    y = MARGIN + HEADER_H
    for _ in range(line + 1):
        top = y
        group_y = y
        y += GROUP_H if has_groups else 0
        tag_y = y
        y += TAG_H if tags_on else 4
        mixer_y = y
        y += mixer_h + ROW_GAP
        ffn_y = y
        y += ffn_h
        index_y = y
        y += INDEX_H
        band_y = y
        y += BAND_H if has_bands else 0
        layout.lines.append(LineBox(top, group_y, tag_y, mixer_y, ffn_y, index_y, band_y, y))
        y += LINE_GAP

    inner = max(2.0, cell_w * 0.08)  # a hairline of background between cells
    group_extent: dict[int, list[float]] = {}
    for it, ln, cx in placed:
        lb = layout.lines[ln]
        mixer_rect = QRectF(cx + inner / 2, lb.mixer_y, cell_w - inner, mixer_h)
        ffn_rect = QRectF(cx + inner / 2, lb.ffn_y, cell_w - inner, ffn_h)
        index = it.represents[0]
        is_main = it.key[0] == "layer"
        label = str(index) if (not is_main or index % step == 0 or folded) else None
        tag = str(index) if (tags_on and is_main and index in full_attention) else None
        if tag is not None and folded and len(it.represents) > 1:
            tag = f"{index}+"
        layout.cells.append(CellBox(it.key, it.layer, it.represents, ln, mixer_rect, ffn_rect, label, tag))
        if it.group is not None:
            ext = group_extent.setdefault(it.group, [cx, cx + cell_w, ln])
            if ln == ext[2]:
                ext[1] = cx + cell_w
    for g, (left, right, ln) in group_extent.items():
        kind, text = group_specs[g]
        lb = layout.lines[int(ln)]
        layout.groups.append(GroupBox(QRectF(left, lb.group_y, right - left, GROUP_H), text, kind))

    if has_bands:
        _add_bands(layout, layer_map)

    y = layout.lines[-1].bottom + FOOTER_GAP
    layout.callout_y = y
    if callout:
        y += CALLOUT_H
    layout.legend_y = y
    layout.height = y + LEGEND_H + MARGIN
    return layout


def _add_bands(layout: MapLayout, layer_map: LayerMap) -> None:
    """One band per PP stage and line, under the cells of the stage's layers."""
    spans: dict[tuple[int, int], list[float]] = {}
    for cell in layout.cells:
        if cell.key[0] != "layer":
            continue
        stage = cell.layer.pp_stage
        left, right = cell.mixer_rect.left() - 1, cell.mixer_rect.right() + 1
        span = spans.setdefault((stage, cell.line), [left, right])
        span[0], span[1] = min(span[0], left), max(span[1], right)
    for (stage, ln), (left, right) in sorted(spans.items()):
        layers = layer_map.layers_of_stage(stage)
        text = f"PP {stage}"
        if layers and right - left > 110:
            text += f" · layers {layers[0].index}–{layers[-1].index}"
        lb = layout.lines[ln]
        layout.bands.append(BandBox(QRectF(left, lb.band_y + 2, right - left, BAND_H - 3), stage, text))
