"""The layer map widget: one cell per layer, painted by hand (fast, exact, exportable).

It renders the LayerMap held by a `LayerMapState`; hover shows a tooltip, click selects, and
`set_highlight` puts a finding's red marks on the map. Geometry lives in `layer_map_layout`,
drawing in `layer_map_paint`, so export to PNG/SVG draws exactly what is on screen.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QFontMetricsF, QImage, QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from bringup.app.layermap import style as st
from bringup.app.layermap.highlight import Highlight
from bringup.app.layermap.facts import tooltip_text
from bringup.app.layermap.layout import MapLayout, compute_layout
from bringup.app.layermap.paint import header_text, paint_map
from bringup.app.layermap.state import LayerMapState
from bringup.core.errors import UserError
from bringup.core.layermap.vocabulary import Fold, LayerMap


def fold_by_stage(layer_map: LayerMap) -> list[Fold]:
    """Repeats folded within each PP stage, so a folded cell never spans a stage boundary."""
    # Imported here: folding is only needed when the user folds.
    from bringup.core.layermap.folding import fold_layers

    folds: list[Fold] = []
    layers = list(layer_map.layers)
    start = 0
    while start < len(layers):
        stop = start
        while stop < len(layers) and layers[stop].pp_stage == layers[start].pp_stage:
            stop += 1
        offset = layers[start].index
        folds += [Fold(f.start + offset, f.unit, f.times) for f in fold_layers(layers[start:stop])]
        start = stop
    return folds


class LayerMapView(QWidget):
    painted = Signal()  # a map (not the empty placeholder) was drawn on screen
    height_changed = Signal(int)  # the map wrapped differently, zoomed, or gained a callout

    def __init__(self, state: LayerMapState | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state or LayerMapState(self)
        self.state.changed.connect(self._on_state_changed)
        self._layout: MapLayout | None = None
        self._layout_key: tuple | None = None
        self._layout_map: LayerMap | None = None
        self._folds: list[Fold] | None = None
        self._folds_of: LayerMap | None = None
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent, True)
        self.first_paint_done = False
        self.setAccessibleName("Layer map")

    # --- public API -------------------------------------------------------------------------
    @property
    def layer_map(self) -> LayerMap | None:
        return self.state.layer_map

    def set_layer_map(self, layer_map: LayerMap | None) -> None:
        self.state.set_layer_map(layer_map)

    def set_highlight(self, highlight: Highlight) -> None:
        self.state.set_highlight(highlight)

    def clear_highlight(self) -> None:
        self.state.set_highlight(None)

    def set_folded(self, folded: bool) -> None:
        self.state.set_folded(folded)

    def map_layout(self) -> MapLayout | None:
        return self._current_layout(self.width())

    def tooltip_at(self, pos: QPointF | QPoint) -> str:
        layout = self.map_layout()
        cell = layout.cell_at(QPointF(pos)) if layout else None
        if cell is None:
            return ""
        return tooltip_text(cell.layer, mtp=cell.key[0] == "mtp", repeats=list(cell.represents))

    def cell_center(self, index: int, kind: str = "layer") -> QPoint:
        """Where a layer's cell is drawn (for tests and for scrolling it into view)."""
        layout = self.map_layout()
        cell = layout.cell_of((kind, index)) if layout else None
        if cell is None:
            raise KeyError(f"layer {index} is not on the map")
        return cell.mixer_rect.center().toPoint()

    def export(self, path: str | Path, width: int | None = None) -> Path:
        """Write the map as PNG (at 2x for sharp text) or SVG, chosen by the file's suffix."""
        path = Path(path)
        if self.layer_map is None:
            raise UserError("there is no model on the map to export; load a model first")
        layout = compute_layout(self.layer_map, float(width or max(self.width(), 900)),
                                folds=self._folds_for_state(), text_width=self._text_width,
                                callout=self.state.highlight is not None, zoom=self.state.zoom)
        suffix = path.suffix.lower()
        if suffix == ".svg":
            from PySide6.QtSvg import QSvgGenerator

            gen = QSvgGenerator()
            gen.setFileName(str(path))
            gen.setSize(QSize(int(layout.width), int(layout.height)))
            gen.setViewBox(QRectF(0, 0, layout.width, layout.height))
            gen.setResolution(96)  # so the SVG is as many CSS pixels wide as the map, text as on screen
            gen.setTitle(f"Layer map: {self.layer_map.name}")
            gen.setDescription("Bring-up Workbench layer map")
            painter = QPainter(gen)
            paint_map(painter, layout, self.layer_map, self.state)
            painter.end()
        elif suffix == ".png":
            scale = 2
            image = QImage(int(layout.width * scale), int(layout.height * scale), QImage.Format.Format_ARGB32)
            image.fill(st.BACKGROUND)
            painter = QPainter(image)
            painter.scale(scale, scale)
            paint_map(painter, layout, self.layer_map, self.state)
            painter.end()
            if not image.save(str(path), "PNG"):
                raise UserError(f"could not write {path}; check that the folder exists and is writable")
        else:
            raise UserError(f"cannot export the map as {suffix or 'a file without a suffix'!r}; use a .png or .svg name")
        return path

    # --- layout ------------------------------------------------------------------------------
    def _text_width(self, text: str) -> float:
        return QFontMetricsF(st.font(7.5)).horizontalAdvance(text)

    def _folds_for_state(self) -> list[Fold] | None:
        if not self.state.folded or self.layer_map is None:
            return None
        if self._folds_of is not self.layer_map:
            self._folds = fold_by_stage(self.layer_map)
            self._folds_of = self.layer_map
        return self._folds

    def _current_layout(self, width: int) -> MapLayout | None:
        if self.layer_map is None:
            return None
        key = (width, self.state.folded, self.state.highlight is not None, self.state.zoom)
        if key != self._layout_key or self._layout_map is not self.layer_map:
            self._layout = compute_layout(self.layer_map, float(width), folds=self._folds_for_state(),
                                          text_width=self._text_width, callout=self.state.highlight is not None,
                                          zoom=self.state.zoom)
            self._layout_key = key
            self._layout_map = self.layer_map
        return self._layout

    def _on_state_changed(self) -> None:
        self._sync_height()
        if self.layer_map is not None:
            # Screen readers get the strip in words.
            self.setAccessibleDescription(f"{self.layer_map.name}: {header_text(self.layer_map)}")
        self.update()

    def _sync_height(self) -> None:
        layout = self._current_layout(self.width())
        height = int(layout.height) if layout else 120
        if self.height() != height or self.minimumHeight() != height:
            self.setFixedHeight(height)
            self.height_changed.emit(height)

    def sizeHint(self) -> QSize:
        layout = self._current_layout(max(self.width(), 600))
        return QSize(900, int(layout.height) if layout else 120)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._sync_height()

    # --- painting and input ------------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        layout = self._current_layout(self.width())
        if layout is None:
            painter.fillRect(self.rect(), st.BACKGROUND)
            painter.setPen(st.MUTED)
            painter.setFont(st.font(10))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "No model loaded")
        else:
            paint_map(painter, layout, self.layer_map, self.state)
            self.first_paint_done = True
        painter.end()
        if layout is not None:
            self.painted.emit()

    def _key_at(self, pos: QPointF) -> tuple[str, int] | None:
        layout = self.map_layout()
        cell = layout.cell_at(pos) if layout else None
        return cell.key if cell else None

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        self.state.hover(self._key_at(event.position()))
        super().mouseMoveEvent(event)

    def leaveEvent(self, event) -> None:
        self.state.hover(None)
        super().leaveEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.state.select(self._key_at(event.position()))
        super().mousePressEvent(event)

    def wheelEvent(self, event) -> None:
        # Ctrl+wheel zooms the cells; a plain wheel scrolls the panel as usual.
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            steps = event.angleDelta().y() / 120
            self.state.set_zoom(self.state.zoom * (1.15 ** steps))
            event.accept()
            return
        super().wheelEvent(event)

    def keyPressEvent(self, event) -> None:
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            if event.key() in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
                self.state.set_zoom(self.state.zoom * 1.25)
                return
            if event.key() == Qt.Key.Key_Minus:
                self.state.set_zoom(self.state.zoom / 1.25)
                return
            if event.key() == Qt.Key.Key_0:
                self.state.set_zoom(1.0)
                return
        # Left/Right walk the selection along the decoder layers.
        if self.layer_map is not None and event.key() in (Qt.Key.Key_Left, Qt.Key.Key_Right):
            step = -1 if event.key() == Qt.Key.Key_Left else 1
            current = self.state.selected[1] if self.state.selected and self.state.selected[0] == "layer" else -step
            nxt = min(max(current + step, 0), self.layer_map.num_layers - 1)
            self.state.select_layer(self.layer_map.layers[nxt].index)
            return
        if event.key() == Qt.Key.Key_Escape:
            self.state.select(None)
            return
        super().keyPressEvent(event)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            text = self.tooltip_at(event.pos())
            if text:
                QToolTip.showText(event.globalPos(), text, self)
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().event(event)
