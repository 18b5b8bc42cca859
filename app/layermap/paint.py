"""Draws a `MapLayout` with a QPainter: the widget, PNG and SVG export all call `paint_map`."""

from __future__ import annotations

from collections import Counter

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPainterPath, QPen, QPolygonF

from bringup.app.layermap import style as st
from bringup.app.layermap.layout import GUTTER, LEGEND_H, MARGIN, CellBox, MapLayout
from bringup.app.layermap.facts import kv_bytes_per_token, state_bytes_per_request
from bringup.app.layermap.state import LayerMapState
from bringup.core.layermap.vocabulary import LayerMap
from bringup.core.layermap.sizes import format_bytes

MIXER_LETTERS = {
    "attention": "A",
    "sliding_attention": "S",
    "sparse_attention": "I",
    "mamba2": "M",
    "mamba": "m",
    "gated_delta_net": "G",
    "kimi_delta_attention": "K",
    "lightning_attention": "L",
    "short_conv": "C",
}
RADIUS = 3.0


def header_text(layer_map: LayerMap) -> str:
    counts = Counter(l.mixer for l in layer_map.layers)
    parts = [f"{layer_map.num_layers} layers"]
    full = layer_map.full_attention_layers
    if full and len(full) < layer_map.num_layers:
        shown = ", ".join(map(str, full[:14])) + (", …" if len(full) > 14 else "")
        parts.append(f"full attention at {shown}")
    elif full:
        parts.append("full attention in every layer")
    for mixer, n in counts.most_common():
        if mixer not in ("attention", "none") and not (mixer == "attention+mamba2" and len(full) == layer_map.num_layers):
            parts.append(f"{n} {st.MIXER_NAMES.get(mixer, mixer)}")
    moe = len(layer_map.moe_layers)
    if moe:
        parts.append(f"{moe} MoE")
    mlp = len(layer_map.mlp_layers)
    if mlp:
        parts.append(f"{mlp} dense MLP")
    return "   ·   ".join(parts)


def cache_text(layer_map: LayerMap) -> str:
    """What the pools hold per token and per request, at the engine's default dtypes."""
    parts = []
    kv_layers = [l for l in layer_map.layers if l.is_kv]
    state_layers = [l for l in layer_map.layers if l.is_state]
    # A loader that could not size a cache leaves its elements at 0: name the layers, no "0 B".
    if kv_layers:
        kv = sum(kv_bytes_per_token(l) for l in kv_layers)
        parts.append(f"KV pool: {len(kv_layers)} layers" + (f", {format_bytes(kv, short=True)} per token (bf16)" if kv else ""))
    if state_layers:
        state = sum(state_bytes_per_request(l) for l in state_layers)
        parts.append(f"state pool: {len(state_layers)} layers"
                     + (f", {format_bytes(state, short=True)} per request (bf16 conv + fp32 SSM)" if state else ""))
    return "   ·   ".join(parts)


def _cell_fill(painter: QPainter, rect: QRectF, mixer: str, colour_of) -> None:
    if mixer in st.SPLIT_MIXERS:
        top, bottom = st.SPLIT_MIXERS[mixer]
        path = QPainterPath()
        path.addRoundedRect(rect, RADIUS, RADIUS)
        painter.save()
        painter.setClipPath(path)
        half = rect.height() / 2
        painter.fillRect(QRectF(rect.left(), rect.top(), rect.width(), half), colour_of(top))
        painter.fillRect(QRectF(rect.left(), rect.top() + half, rect.width(), rect.height() - half), colour_of(bottom))
        painter.restore()
        return
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(colour_of(mixer))
    painter.drawRoundedRect(rect, RADIUS, RADIUS)


def _shared_kv_hatch(painter: QPainter, rect: QRectF, fill: QColor) -> None:
    """Diagonal stripes: this attention layer reads another layer's KV cache and keeps none."""
    path = QPainterPath()
    path.addRoundedRect(rect, RADIUS, RADIUS)
    painter.save()
    painter.setClipPath(path)
    colour = QColor(st.text_on(fill))
    colour.setAlphaF(0.45)
    painter.setPen(QPen(colour, 1.6))
    step = 5.0
    x = rect.left() - rect.height()
    while x < rect.right():
        painter.drawLine(QPointF(x, rect.bottom()), QPointF(x + rect.height(), rect.top()))
        x += step
    painter.restore()


def _empty_cell(painter: QPainter, rect: QRectF) -> None:
    # A quiet placeholder: a NemotronH block is a mixer or an FFN, so half the slots are empty.
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(st.EMPTY_FILL)
    painter.drawRoundedRect(rect, RADIUS, RADIUS)


def _draw_cell(painter: QPainter, cell: CellBox, letters: bool, error: QColor | None = None) -> None:
    """A layer's mixer and FFN in their kinds' colours; with `error` (a comparison on the map) the parts
    the block has are filled with its error's colour instead, the mixer's letter still naming the kind."""
    layer = cell.layer
    mixer_colour = st.mixer_color if error is None else (lambda _kind: error)
    ffn_colour = st.ffn_color if error is None else (lambda _kind: error)
    if layer.mixer == "none":
        _empty_cell(painter, cell.mixer_rect)
    else:
        _cell_fill(painter, cell.mixer_rect, layer.mixer if error is None else "error", mixer_colour)
        if layer.kv_shared_from is not None:
            _shared_kv_hatch(painter, cell.mixer_rect, mixer_colour(layer.mixer))
        letter = MIXER_LETTERS.get(layer.mixer)
        if letters and letter:
            painter.setPen(st.text_on(mixer_colour(layer.mixer)))
            painter.setFont(st.font(8.5, bold=True))
            painter.drawText(cell.mixer_rect, Qt.AlignmentFlag.AlignCenter, letter)
    if layer.ffn == "none":
        _empty_cell(painter, cell.ffn_rect)
    else:
        _cell_fill(painter, cell.ffn_rect, layer.ffn if error is None else "error", ffn_colour)


def cell_error_colour(cell: CellBox, state: LayerMapState) -> QColor | None:
    """The error colour of a decoder-layer cell while a comparison is on the map (None otherwise)."""
    h = state.highlight
    if h is None or not h.errors or cell.key[0] != "layer":
        return None
    compared, worst = h.error_of(cell.represents)
    return st.error_colour(worst if compared else None, h.tolerance)


def _outline(painter: QPainter, rect: QRectF, colour: QColor, width: float, style=Qt.PenStyle.SolidLine) -> None:
    pen = QPen(colour, width, style)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    painter.setPen(pen)
    painter.setBrush(Qt.BrushStyle.NoBrush)
    grow = width / 2 + 1
    painter.drawRoundedRect(rect.adjusted(-grow, -grow, grow, grow), RADIUS + 1, RADIUS + 1)


def _marker(painter: QPainter, cell: CellBox, tag_bottom: float, colour: QColor) -> None:
    """A small downward triangle above the cell."""
    cx = cell.mixer_rect.center().x()
    size = min(7.0, cell.mixer_rect.width() / 2)
    y = tag_bottom - 1
    tri = QPolygonF([QPointF(cx - size, y - size), QPointF(cx + size, y - size), QPointF(cx, y)])
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(colour)
    painter.drawPolygon(tri)


def paint_map(painter: QPainter, layout: MapLayout, layer_map: LayerMap | None, state: LayerMapState) -> None:
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
    painter.fillRect(QRectF(0, 0, layout.width, layout.height), st.BACKGROUND)
    if layer_map is None:
        return
    small = st.font(7.5)
    small_metrics = QFontMetricsF(small)

    # Header: what the strip shows, in words.
    painter.setPen(st.TEXT)
    painter.setFont(st.font(9.5))
    header = QRectF(MARGIN, MARGIN, layout.width - 2 * MARGIN, 18)
    painter.drawText(header, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                     QFontMetricsF(st.font(9.5)).elidedText(header_text(layer_map), Qt.TextElideMode.ElideRight, header.width()))
    caches = cache_text(layer_map)
    if caches:
        painter.setPen(st.MUTED)
        painter.setFont(st.font(8.5))
        line2 = header.translated(0, 18)
        painter.drawText(line2, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         QFontMetricsF(st.font(8.5)).elidedText(caches, Qt.TextElideMode.ElideRight, line2.width()))

    # Row names and PP bands.
    painter.setFont(st.font(8))
    for lb in layout.lines:
        painter.setPen(st.MUTED)
        painter.drawText(QRectF(MARGIN, lb.mixer_y, GUTTER - 6, lb.ffn_y - lb.mixer_y), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, "mixer")
        painter.drawText(QRectF(MARGIN, lb.ffn_y, GUTTER - 6, lb.index_y - lb.ffn_y), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, "ffn")
    for band in layout.bands:
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(st.stage_color(band.stage))
        painter.drawRoundedRect(band.rect, 3, 3)
        painter.setPen(st.STAGE_TEXT)
        painter.setFont(small)
        painter.drawText(band.rect.adjusted(4, 0, -2, 0), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         small_metrics.elidedText(band.text, Qt.TextElideMode.ElideRight, band.rect.width() - 6))

    # Folded units ("× 5") and the MTP title above their cells.
    for n, group in enumerate(layout.groups):
        r = group.rect
        pen = QPen(st.MUTED, 1.0)
        painter.setPen(pen)
        y = r.bottom() - 3
        painter.drawLine(QPointF(r.left() + 1, y), QPointF(r.right() - 1, y))
        painter.drawLine(QPointF(r.left() + 1, y), QPointF(r.left() + 1, y + 3))
        painter.drawLine(QPointF(r.right() - 1, y), QPointF(r.right() - 1, y + 3))
        painter.setFont(st.font(8, bold=True))
        painter.setPen(st.TEXT)
        # The label may run on past a narrow unit, up to the next group on the line.
        limit = layout.width - MARGIN
        for other in layout.groups[n + 1:]:
            if abs(other.rect.top() - r.top()) < 1:
                limit = other.rect.left() - 6
                break
        text_rect = QRectF(r.left() + 2, r.top(), max(r.width() - 4, limit - r.left() - 2), r.height() - 4)
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom,
                         QFontMetricsF(st.font(8, bold=True)).elidedText(group.text, Qt.TextElideMode.ElideRight, text_rect.width()))

    _paint_halos(painter, layout, state)
    letters = layout.cell_w >= 15
    for cell in layout.cells:
        _draw_cell(painter, cell, letters, cell_error_colour(cell, state))

    # Indices under the cells, full-attention tags above them.
    selected_cell = layout.cell_of(state.selected) if state.selected else None
    for cell in layout.cells:
        lb = layout.lines[cell.line]
        if cell.label is not None:
            bold = cell is selected_cell
            painter.setFont(st.font(7.5, bold=bold))
            painter.setPen(st.TEXT if bold else st.MUTED)
            rect = QRectF(cell.mixer_rect.center().x() - 20, lb.index_y, 40, 14)
            painter.drawText(rect, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignVCenter, cell.label)
        if cell.tag is not None:
            painter.setFont(st.font(8, bold=True))
            painter.setPen(st.ATTENTION_TAG)
            rect = QRectF(cell.mixer_rect.center().x() - 22, lb.tag_y, 44, 15)
            painter.drawText(rect, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignVCenter, cell.tag)

    _paint_marks(painter, layout, state, selected_cell)
    _paint_callout(painter, layout, layer_map, state)
    _paint_legend(painter, layout, layer_map, state)


def _highlight_roles(layout: MapLayout, state: LayerMapState):
    """(cell, 'requested' | 'related') for each decoder-layer cell a highlight names."""
    h = state.highlight
    if h is None:
        return
    requested, related = set(h.requested), set(h.related)
    for cell in layout.cells:
        if cell.key[0] != "layer":
            continue
        reps = set(cell.represents)
        if reps & requested:
            yield cell, "requested"
        elif reps & related:
            yield cell, "related"


def _paint_halos(painter: QPainter, layout: MapLayout, state: LayerMapState) -> None:
    """A pale red field under a requested cell, so its own colour stays readable."""
    if state.highlight is None:
        return
    colour = st.SEVERITY_COLORS.get(state.highlight.severity, st.HIGHLIGHT)
    for cell, role in _highlight_roles(layout, state):
        if role == "requested":
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(colour.red(), colour.green(), colour.blue(), 50))
            painter.drawRoundedRect(cell.rect.adjusted(-4, -4, 4, 4), RADIUS + 2, RADIUS + 2)


def _paint_marks(painter: QPainter, layout: MapLayout, state: LayerMapState, selected_cell: CellBox | None) -> None:
    hovered = layout.cell_of(state.hovered) if state.hovered else None
    if hovered is not None and hovered is not selected_cell:
        _outline(painter, hovered.rect, st.HOVER, 1.2)
    if selected_cell is not None:  # drawn a little further out, so a red mark stays visible inside it
        _outline(painter, selected_cell.rect.adjusted(-2.5, -2.5, 2.5, 2.5), st.SELECTED, 2.0)
    if state.highlight is None:
        return
    colour = st.SEVERITY_COLORS.get(state.highlight.severity, st.HIGHLIGHT)
    for cell, role in _highlight_roles(layout, state):
        if role == "requested":
            _outline(painter, cell.rect, colour, 2.5)
            _marker(painter, cell, layout.lines[cell.line].mixer_y - 1, colour)
        else:
            _outline(painter, cell.rect, colour, 1.5, Qt.PenStyle.DashLine)


def _paint_callout(painter: QPainter, layout: MapLayout, layer_map: LayerMap, state: LayerMapState) -> None:
    h = state.highlight
    if h is None or not (h.message or h.requested):
        return
    colour = st.SEVERITY_COLORS.get(h.severity, st.HIGHLIGHT)
    text = h.message
    if not text:
        text = "layers " + ", ".join(map(str, h.requested))
    painter.setFont(st.font(9, bold=True))
    metrics = QFontMetricsF(st.font(9, bold=True))
    rect = QRectF(MARGIN + GUTTER, layout.callout_y, layout.width - 2 * MARGIN - GUTTER, 18)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(colour)
    painter.drawEllipse(QPointF(rect.left() - 10, rect.center().y()), 4, 4)
    painter.setPen(colour)
    painter.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                     metrics.elidedText(text, Qt.TextElideMode.ElideRight, rect.width()))


def _error_legend(state: LayerMapState) -> list[tuple[str, str, str]]:
    h = state.highlight
    tol = h.tolerance or 0.0
    entries = [("error", "ok", f"rel err < {tol / 2:.2g}"), ("error", "near", f"< {tol:.2g}"),
               ("error", "beyond", f"> {tol:.2g} or NaN")]
    if any(v is None for _, v in h.errors):
        entries.append(("error", "none", "not compared"))
    return entries


def _legend_entries(layer_map: LayerMap, state: LayerMapState) -> list[tuple[str, str, str]]:
    """(kind, key, text): kind is mixer | ffn | mark | error. A comparison on the map shows its error
    scale instead of the kinds (the mixer letters still name them)."""
    if state.highlight is not None and state.highlight.errors:
        return _error_legend(state) + [("mark", "requested", "named by a finding")] * bool(state.highlight.requested)
    all_layers = list(layer_map.layers) + list(layer_map.mtp_layers)
    mixers = [m for m in (*st.MIXER_NAMES,) if any(l.mixer == m for l in all_layers)]
    ffns = [f for f in st.FFN_NAMES if any(l.ffn == f for l in all_layers)]
    entries = [("mixer", m, st.MIXER_NAMES[m]) for m in mixers if m != "none"]
    entries += [("ffn", f, st.FFN_NAMES[f]) for f in ffns if f != "none"]
    if "none" in mixers or "none" in ffns:
        entries.append(("mixer", "none", "empty (the block is only a mixer or only an FFN)"))
    shared = next((l for l in all_layers if l.kv_shared_from is not None), None)
    if shared is not None:
        entries.append(("shared_kv", shared.mixer, "hatched: reuses an earlier layer's KV cache"))
    if state.highlight is not None:
        entries.append(("mark", "requested", "named by a finding"))
        if state.highlight.related:
            entries.append(("mark", "related", "valid layers"))
    return entries


def _paint_legend(painter: QPainter, layout: MapLayout, layer_map: LayerMap, state: LayerMapState) -> None:
    x = MARGIN + GUTTER
    y = layout.legend_y + (LEGEND_H - 12) / 2
    font = st.font(8)
    metrics = QFontMetricsF(font)
    painter.setFont(font)
    for kind, key, text in _legend_entries(layer_map, state):
        swatch = QRectF(x, y, 18 if kind != "ffn" else 18, 12 if kind != "ffn" else 8)
        if kind == "ffn":
            swatch.moveTop(y + 2)
        if kind == "mark":
            colour = st.SEVERITY_COLORS.get(state.highlight.severity, st.HIGHLIGHT) if state.highlight else st.HIGHLIGHT
            style = Qt.PenStyle.SolidLine if key == "requested" else Qt.PenStyle.DashLine
            painter.setPen(QPen(colour, 2.0 if key == "requested" else 1.5, style))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(swatch.adjusted(1, 1, -1, -1), 2, 2)
        elif kind == "error":
            _cell_fill(painter, swatch, "error", lambda _k, key=key: QColor(st.ERROR_COLORS[key]))
        elif kind == "shared_kv":
            _cell_fill(painter, swatch, key, st.mixer_color)
            _shared_kv_hatch(painter, swatch, st.mixer_color(key))
        elif key == "none":
            _empty_cell(painter, swatch)
        elif kind == "mixer":
            _cell_fill(painter, swatch, key, st.mixer_color)
        else:
            _cell_fill(painter, swatch, key, st.ffn_color)
        painter.setPen(st.TEXT)
        painter.setFont(font)
        tw = metrics.horizontalAdvance(text)
        painter.drawText(QRectF(x + 23, layout.legend_y, tw + 4, LEGEND_H), Qt.AlignmentFlag.AlignVCenter, text)
        x += 23 + tw + 18
        if x > layout.width - MARGIN - 60:
            break
