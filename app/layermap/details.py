"""The details panel beside the map: the selected layer's facts, or the model's summary."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from bringup.app.layermap import style as st
from bringup.app.layermap.facts import describe, detail_rows, model_summary
from bringup.app.layermap.state import LayerMapState
from bringup.core.layermap.vocabulary import Layer


def _table(rows: list[tuple[str, str]]) -> str:
    cells = "".join(
        f"<tr><td style='color:{st.MUTED.name()}; padding:1px 10px 1px 0; white-space:nowrap'>{escape(k)}</td>"
        f"<td style='padding:1px 0'>{escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table cellspacing='0'>{cells}</table>"


class LayerDetails(QFrame):
    def __init__(self, state: LayerMapState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.setObjectName("layerDetails")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.title = QLabel()
        self.title.setObjectName("detailsTitle")
        self.subtitle = QLabel()
        self.subtitle.setObjectName("detailsSubtitle")
        self.body = QLabel()
        self.body.setTextFormat(Qt.TextFormat.RichText)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.body.setWordWrap(True)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self.body)
        box = QVBoxLayout(self)
        box.setContentsMargins(12, 10, 12, 8)
        box.setSpacing(2)
        box.addWidget(self.title)
        box.addWidget(self.subtitle)
        box.addSpacing(4)
        box.addWidget(scroll, 1)
        state.selection_changed.connect(self._refresh)
        state.layer_map_changed.connect(self._refresh)
        self._refresh()

    def text(self) -> str:
        """Everything the panel shows, as plain text (tests, copy)."""
        return "\n".join([self.title.text(), self.subtitle.text(), self.body.text()])

    def _refresh(self, *_args) -> None:
        layer = self.state.layer(self.state.selected)
        layer_map = self.state.layer_map
        if layer is not None:
            self._show_layer(layer, mtp=self.state.selected[0] == "mtp")
        elif layer_map is not None:
            self.title.setText("Model")
            self.subtitle.setText("Click a layer for its details")
            self.body.setText(_table(model_summary(layer_map)))
        else:
            self.title.setText("No model")
            self.subtitle.setText("Pick a model in the bar above")
            self.body.setText("")

    def _show_layer(self, layer: Layer, *, mtp: bool) -> None:
        self.title.setText(f"MTP block {layer.index}" if mtp else f"Layer {layer.index}")
        self.subtitle.setText(describe(layer))
        self.body.setText(_table(detail_rows(layer)))
