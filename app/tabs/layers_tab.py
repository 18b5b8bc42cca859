"""The Layers tab: every layer as a table row, with a filter (index, mixer, ffn, attribute values).

Selecting a row selects the layer on the map; selecting on the map selects the row.
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QTableView, QVBoxLayout, QWidget

from bringup.app.layermap.facts import human_count, kv_bytes_per_token, pool_text, state_bytes_per_request
from bringup.core.layermap.vocabulary import LayerMap
from bringup.core.layermap.sizes import format_bytes

COLUMNS = ("layer", "mixer", "ffn", "KV pool", "state pool", "PP stage", "params", "KV / token", "state / request")


class LayerTableModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self.layers = []

    def set_layer_map(self, layer_map: LayerMap | None) -> None:
        self.beginResetModel()
        self.layers = list(layer_map.layers) if layer_map else []
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.layers)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        layer = self.layers[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.UserRole:  # sort key
            return (layer.index, layer.mixer, layer.ffn, layer.kv_pool_index if layer.kv_pool_index is not None else -1,
                    layer.state_pool_index if layer.state_pool_index is not None else -1, layer.pp_stage, layer.params,
                    kv_bytes_per_token(layer), state_bytes_per_request(layer))[col]
        if role == Qt.ItemDataRole.ToolTipRole:
            return "\n".join(f"{k}: {v}" for k, v in layer.facts().items()) or None
        if role == Qt.ItemDataRole.TextAlignmentRole and col not in (1, 2):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        kv, state = kv_bytes_per_token(layer), state_bytes_per_request(layer)
        # A KV-sharing layer has no pool slot of its own: say whose KV it reads.
        kv_pool = f"layer {layer.kv_shared_from}'s" if layer.kv_shared_from is not None else pool_text(layer.kv_pool_index)
        return (str(layer.index), layer.mixer, layer.ffn, kv_pool, pool_text(layer.state_pool_index),
                str(layer.pp_stage), human_count(layer.params), format_bytes(kv, short=True) if kv else "—",
                format_bytes(state, short=True) if state else "—")[col]

    def search_text(self, row: int) -> str:
        layer = self.layers[row]
        facts = " ".join(f"{k}={v}" for k, v in layer.facts().items())
        return f"{layer.index} {layer.mixer} {layer.ffn} {facts}".lower()


class _Filter(QSortFilterProxyModel):
    def __init__(self, model: LayerTableModel) -> None:
        super().__init__()
        self.setSourceModel(model)
        self.setSortRole(Qt.ItemDataRole.UserRole)
        self.words: list[str] = []

    def set_text(self, text: str) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt >= 6.10; invalidateFilter is deprecated there
            self.beginFilterChange()
            self.words = text.lower().split()
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self.words = text.lower().split()
            self.invalidateFilter()

    def filterAcceptsRow(self, row: int, parent) -> bool:
        haystack = self.sourceModel().search_text(row)
        tokens = set(haystack.split())
        # A number must match a whole token (so "5" finds layer 5, not 15); words match inside.
        return all((word in tokens) if word.isdigit() else (word in haystack) for word in self.words)


class LayersTab(QWidget):
    title = "Layers"
    select_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = LayerTableModel()
        self.proxy = _Filter(self.model)
        self.find = QLineEdit()
        self.find.setPlaceholderText("Find: a layer index, mixer, ffn or attribute (e.g. 'attention', 'moe', 'num_experts=128')")
        self.find.setClearButtonEnabled(True)
        self.find.textChanged.connect(self.proxy.set_text)
        self.count = QLabel()
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setAlternatingRowColors(True)
        self.table.selectionModel().currentRowChanged.connect(self._on_row)
        self.proxy.rowsInserted.connect(self._update_count)
        self.proxy.rowsRemoved.connect(self._update_count)
        self.proxy.modelReset.connect(self._update_count)
        self.proxy.layoutChanged.connect(self._update_count)
        self.table.verticalScrollBar().valueChanged.connect(self._update_count)
        top = QHBoxLayout()
        top.addWidget(self.find, 1)
        top.addWidget(self.count)
        box = QVBoxLayout(self)
        box.setContentsMargins(8, 8, 8, 8)
        box.addLayout(top)
        box.addWidget(self.table, 1)
        self._syncing = False

    def set_layer_map(self, layer_map: LayerMap | None) -> None:
        self.model.set_layer_map(layer_map)
        self._update_count()

    def set_selected_layer(self, layer) -> None:
        if layer is None or self._syncing:
            return
        for row in range(self.proxy.rowCount()):
            source = self.proxy.mapToSource(self.proxy.index(row, 0))
            if self.model.layers[source.row()] is layer:
                self._syncing = True
                self.table.selectRow(row)
                self._syncing = False
                return

    def _on_row(self, current, _previous) -> None:
        if self._syncing or not current.isValid():
            return
        layer = self.model.layers[self.proxy.mapToSource(current).row()]
        self._syncing = True
        self.select_requested.emit(layer.index)
        self._syncing = False

    def _update_count(self, *_args) -> None:
        """What the table shows: the filter's matches and, when it scrolls, which rows are in view
        (not "52 of 52 layers" over six visible rows)."""
        matched, total = self.proxy.rowCount(), self.model.rowCount()
        text = f"{matched} of {total} layers match" if matched < total else f"all {total} layers"
        first = self.table.rowAt(0)
        last = self.table.rowAt(self.table.viewport().height() - 1)
        last = matched - 1 if last < 0 else last
        if matched and first >= 0 and last - first + 1 < matched:
            text += f" \u00b7 rows {first + 1}\u2013{last + 1} in view (scroll for the rest)"
        self.count.setText(text)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt)
        super().resizeEvent(event)
        self._update_count()
