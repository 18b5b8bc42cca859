"""The map area of the window: a small toolbar, the layer map, and the details panel beside it."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from bringup.app.layermap.highlight import Highlight
from bringup.app.layermap.details import LayerDetails
from bringup.app.layermap.state import LayerMapState
from bringup.app.layermap.view import LayerMapView
from bringup.core.errors import UserError
from bringup.core.layermap.vocabulary import LayerMap

DETAILS_WIDTH = 300
MIN_HEIGHT = 300  # room for the details panel beside a one-line map


def dropped_model(event) -> str | None:
    """The config.json or model folder being dragged, or None (logs go to the Diagnose tab)."""
    mime = event.mimeData()
    if not mime.hasUrls() or len(mime.urls()) != 1 or not mime.urls()[0].isLocalFile():
        return None
    path = Path(mime.urls()[0].toLocalFile())
    if path.is_dir() or (path.is_file() and path.suffix.lower() == ".json"):
        return str(path)
    return None


class LayerMapPanel(QFrame):
    model_dropped = Signal(str)  # a config.json or model folder dropped on the map

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mapPanel")
        self.setAcceptDrops(True)
        self.state = LayerMapState(self)
        self.view = LayerMapView(self.state)
        self.details = LayerDetails(self.state)
        self.details.setFixedWidth(DETAILS_WIDTH)

        title = QLabel("Layer map")
        title.setObjectName("sectionTitle")
        self.fold = QToolButton()
        self.fold.setText("Fold repeats")
        self.fold.setCheckable(True)
        self.fold.setToolTip("Draw each repeating block once, with its count")
        self.fold.toggled.connect(self._set_folded)
        self.clear_marks = QToolButton()
        self.clear_marks.setText("Clear marks")
        self.clear_marks.clicked.connect(self.clear_highlight)
        self.clear_marks.setVisible(False)
        self.zoom_out = QToolButton()
        self.zoom_out.setText("−")
        self.zoom_out.setToolTip("Smaller cells (Ctrl+-, Ctrl+wheel)")
        self.zoom_out.clicked.connect(lambda: self.state.set_zoom(self.state.zoom / 1.25))
        self.zoom_in = QToolButton()
        self.zoom_in.setText("+")
        self.zoom_in.setToolTip("Larger cells (Ctrl++, Ctrl+wheel; Ctrl+0 resets)")
        self.zoom_in.clicked.connect(lambda: self.state.set_zoom(self.state.zoom * 1.25))
        self.export_png = QToolButton()
        self.export_png.setText("Export PNG…")
        self.export_png.clicked.connect(lambda: self._export("png"))
        self.export_svg = QToolButton()
        self.export_svg.setText("Export SVG…")
        self.export_svg.clicked.connect(lambda: self._export("svg"))
        bar = QHBoxLayout()
        bar.setContentsMargins(12, 6, 8, 0)
        bar.addWidget(title)
        bar.addStretch(1)
        for button in (self.clear_marks, self.zoom_out, self.zoom_in, self.fold, self.export_png, self.export_svg):
            bar.addWidget(button)

        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._context_menu)

        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        holder = QWidget()
        holder.setObjectName("mapHolder")
        self.scroll.setObjectName("mapScroll")
        holder_box = QVBoxLayout(holder)
        holder_box.setContentsMargins(0, 0, 0, 0)
        holder_box.addWidget(self.view)
        holder_box.addStretch(1)
        self.scroll.setWidget(holder)

        left = QVBoxLayout()
        left.setContentsMargins(0, 0, 0, 0)
        left.setSpacing(0)
        left.addLayout(bar)
        left.addWidget(self.scroll, 1)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        row.addLayout(left, 1)
        divider = QFrame()
        divider.setFrameShape(QFrame.Shape.VLine)
        divider.setObjectName("divider")
        row.addWidget(divider)
        row.addWidget(self.details)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def set_layer_map(self, layer_map: LayerMap | None) -> None:
        self.state.set_layer_map(layer_map)
        self.clear_marks.setVisible(self.state.highlight is not None)

    def set_highlight(self, highlight: Highlight | None) -> None:
        if highlight is None:
            self.clear_highlight()
            return
        self.state.set_highlight(highlight)
        self.clear_marks.setVisible(True)
        if highlight.requested:  # bring the named layer into view
            try:
                point = self.view.cell_center(highlight.requested[0])
            except KeyError:
                return
            self.scroll.ensureVisible(point.x(), point.y(), 10, 60)

    def clear_highlight(self) -> None:
        self.state.set_highlight(None)
        self.clear_marks.setVisible(False)

    def preferred_height(self) -> int:
        """Enough to show the whole map without scrolling (plus the toolbar)."""
        return max(MIN_HEIGHT, self.view.height() + 40)

    def _set_folded(self, folded: bool) -> None:
        try:
            self.state.set_folded(folded)
            self.view.update()
        except UserError as err:
            self.fold.setChecked(False)
            QMessageBox.warning(self, "Fold repeats", str(err))

    def _export(self, kind: str) -> None:
        if self.state.layer_map is None:
            return
        name = self.state.layer_map.name.replace("/", "_") + f"-layers.{kind}"
        path, _ = QFileDialog.getSaveFileName(self, f"Export the layer map as {kind.upper()}", name,
                                              f"{kind.upper()} (*.{kind})")
        if not path:
            return
        if not path.lower().endswith(f".{kind}"):
            path += f".{kind}"
        try:
            self.view.export(path)
        except UserError as err:
            QMessageBox.warning(self, "Export", str(err))

    def context_actions(self, pos) -> list[tuple[str, object]]:
        """(label, callback) for the map's right-click menu at `pos` (None: a separator)."""
        actions: list[tuple[str, object]] = []
        text = self.view.tooltip_at(pos)
        if text:
            title = text.splitlines()[0]
            actions.append((f"Copy {title.lower()} details", lambda: QGuiApplication.clipboard().setText(text)))
        if self.state.layer_map is not None:
            actions.append(("Unfold repeats" if self.state.folded else "Fold repeats", self.fold.toggle))
            if self.state.highlight is not None:
                actions.append(("Clear marks", self.clear_highlight))
            actions.append(("Export PNG…", lambda: self._export("png")))
            actions.append(("Export SVG…", lambda: self._export("svg")))
        return actions

    def _context_menu(self, pos) -> None:
        actions = self.context_actions(pos)
        if not actions:
            return
        menu = QMenu(self)
        for label, callback in actions:
            menu.addAction(label).triggered.connect(callback)
        menu.exec(self.view.mapToGlobal(pos))

    def dragEnterEvent(self, event) -> None:
        if dropped_model(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:
        path = dropped_model(event)
        if path:
            event.acceptProposedAction()
            self.model_dropped.emit(path)
        else:
            event.ignore()
