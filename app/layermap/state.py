"""The layer map's view state, apart from the widget that draws it (napari's model/view split).

Which model is shown, which layer is selected or hovered, whether repeats are folded, and the
current highlight. Widgets listen to `changed`; tabs and the details panel read the same object.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from bringup.app.layermap.highlight import Highlight
from bringup.core.layermap.vocabulary import Layer, LayerMap


ZOOM_RANGE = (0.8, 3.0)


class LayerMapState(QObject):
    changed = Signal()  # anything visible changed: repaint
    layer_map_changed = Signal(object)  # LayerMap | None
    selection_changed = Signal(object)  # Layer | None (MTP blocks included)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.layer_map: LayerMap | None = None
        self.selected: tuple[str, int] | None = None  # ("layer" | "mtp", index)
        self.hovered: tuple[str, int] | None = None
        self.folded = False
        self.zoom = 1.0  # cell size factor (Ctrl+wheel, Ctrl +/-)
        self.highlight: Highlight | None = None

    def set_layer_map(self, layer_map: LayerMap | None) -> None:
        """Show another map. The same model again (say with another PP split) keeps the
        selection and the highlight; a different model starts clean."""
        previous = self.layer_map
        same_model = (previous is not None and layer_map is not None and previous.name == layer_map.name
                      and previous.num_layers == layer_map.num_layers)
        self.layer_map = layer_map
        self.hovered = None
        if not same_model:
            self.selected = None
            self.highlight = None
        self.layer_map_changed.emit(layer_map)
        self.selection_changed.emit(self.layer(self.selected))
        self.changed.emit()

    def layer(self, key: tuple[str, int] | None) -> Layer | None:
        if key is None or self.layer_map is None:
            return None
        kind, index = key
        layers = self.layer_map.mtp_layers if kind == "mtp" else self.layer_map.layers
        for layer in layers:
            if layer.index == index:
                return layer
        return None

    def select(self, key: tuple[str, int] | None) -> None:
        if key is not None and self.layer(key) is None:
            key = None
        if key == self.selected:
            return
        self.selected = key
        self.selection_changed.emit(self.layer(key))
        self.changed.emit()

    def select_layer(self, index: int | None) -> None:
        self.select(None if index is None else ("layer", index))

    def hover(self, key: tuple[str, int] | None) -> None:
        if key != self.hovered:
            self.hovered = key
            self.changed.emit()

    def set_folded(self, folded: bool) -> None:
        if folded != self.folded:
            self.folded = folded
            self.changed.emit()

    def set_zoom(self, zoom: float) -> None:
        zoom = min(max(zoom, ZOOM_RANGE[0]), ZOOM_RANGE[1])
        if abs(zoom - self.zoom) > 1e-6:
            self.zoom = zoom
            self.changed.emit()

    def set_highlight(self, highlight: Highlight | None) -> None:
        self.highlight = highlight
        self.changed.emit()

    def highlight_role(self, index: int) -> str | None:
        """'requested', 'related' or None for a decoder layer."""
        h = self.highlight
        if h is None:
            return None
        if index in h.requested:
            return "requested"
        if index in h.related:
            return "related"
        return None
