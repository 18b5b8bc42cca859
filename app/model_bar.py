"""The model bar: pick a model (catalogue, file, folder or hub id), watch it load, see what it is."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from bringup.app.layermap.facts import family_note, family_text, human_count
from bringup.app.elided_label import ElidedLabel
from bringup.core.layermap.vocabulary import LayerMap


def model_facts(layer_map: LayerMap) -> str:
    """'nemotron_h · hybrid: mamba2 · 52 layers · 31.6 B params, 3.58 B active'."""
    parts = [layer_map.model_type or "unknown type"]
    parts.append(family_text(layer_map))
    parts.append(f"{layer_map.num_layers} layers" + (f" + {len(layer_map.mtp_layers)} MTP" if layer_map.mtp_layers else ""))
    params = f"{human_count(layer_map.params_total)} params"
    if layer_map.params_active:
        params += f", {human_count(layer_map.params_active)} active"
    parts.append(params)
    if layer_map.pp_size > 1:
        parts.append(f"PP {layer_map.pp_size}")
    return "   ·   ".join(parts)


class RunningBadge(QFrame):
    """What the engine runs now, under the model bar; when the map shows another model, says so
    and offers to show the running one."""

    switch_requested = Signal(str)  # the source to load: the running model's

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("runningBadge")
        self.served = None
        self.text = QLabel()
        self.text.setObjectName("runningText")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.switch = QPushButton("Show the running model")
        self.switch.setToolTip("Load the running model's map")
        self.switch.clicked.connect(lambda: self.served is not None and self.switch_requested.emit(self.served.map_source))
        row = QHBoxLayout(self)
        row.setContentsMargins(12, 4, 12, 4)
        row.addWidget(self.text, 1)
        row.addWidget(self.switch)
        self.hide()

    @property
    def mismatch(self) -> bool:
        """Whether it says the map shows another model than the one running."""
        return self.served is not None and not self.switch.isHidden()

    def show_running(self, served, layer_map: LayerMap | None) -> None:
        """`served`: a ServedModel, or None (nothing runs: the badge goes)."""
        import html

        self.served = served
        if served is None:
            self.hide()
            return
        same = served.is_map_of(layer_map)
        noise = " · <b style='color:#C62828'>random weights</b>" if served.random_weights else ""
        text = f"<b style='color:#2E7D32'>▶ Running</b> {html.escape(served.name)} · {html.escape(served.label)}{noise}"
        if not same:
            shown = html.escape(layer_map.name) if layer_map is not None else "no model"
            text += (f"<br><b style='color:#B45309'>The map is not the running model</b>: it shows {shown}.")
        self.text.setText(text)
        self.switch.setVisible(not same)
        self.setProperty("mismatch", not same)
        self.show()


class ModelBar(QFrame):
    load_requested = Signal(str, int)  # source, pp
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelBar")
        self.source = QComboBox()
        self.source.setEditable(True)
        self.source.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.source.setMinimumWidth(340)
        self.source.setToolTip("A catalogue name, a Hugging Face hub id (org/name), a config.json, a .gguf file or a model folder")
        self.source.lineEdit().setPlaceholderText("catalogue name, hub id, config.json, .gguf or folder")
        self.source.lineEdit().returnPressed.connect(self.request_load)
        self.source.activated.connect(lambda _i: self.request_load())
        self._fill_catalogue()

        self.open_file = QPushButton("Open config…")
        self.open_file.clicked.connect(self._pick_file)
        self.open_folder = QPushButton("Open folder…")
        self.open_folder.clicked.connect(self._pick_folder)
        self.load_button = QPushButton("Load")
        self.load_button.setDefault(True)
        self.load_button.clicked.connect(self.request_load)
        self.pp = QSpinBox()
        self.pp.setRange(1, 64)
        self.pp.setPrefix("PP ")
        self.pp.setToolTip("Pipeline-parallel stages: the map shows which layers each stage holds")
        self.pp.valueChanged.connect(lambda _v: self.request_load())

        self.name = QLabel("No model")
        self.name.setObjectName("modelName")
        self.name.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.facts = ElidedLabel("")  # elided on a narrow window; the whole line on hover
        self.facts.setObjectName("modelFacts")

        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # busy: loaders report steps, not fractions
        self.progress.setFixedWidth(120)
        self.progress.setTextVisible(False)
        self.progress_text = QLabel()
        self.progress_text.setObjectName("progressText")
        self.cancel = QPushButton("Cancel")
        self.cancel.clicked.connect(self.cancel_requested)

        row = QHBoxLayout()
        row.setSpacing(6)
        row.addWidget(self.source, 1)
        row.addWidget(self.load_button)
        row.addWidget(self.open_file)
        row.addWidget(self.open_folder)
        row.addWidget(self.pp)
        info = QHBoxLayout()
        info.setSpacing(14)
        info.addWidget(self.name)
        info.addWidget(self.facts, 1)
        info.addWidget(self.progress_text)
        info.addWidget(self.progress)
        info.addWidget(self.cancel)
        box = QVBoxLayout(self)
        box.setContentsMargins(12, 10, 12, 8)
        box.setSpacing(6)
        box.addLayout(row)
        box.addLayout(info)
        self.set_busy(False)

    def _fill_catalogue(self) -> None:
        from bringup.core.sources import catalogue

        for entry in catalogue.entries():
            self.source.addItem(entry.name, entry.name)
            self.source.setItemData(self.source.count() - 1, f"{entry.hub_id}\n{entry.family}: {entry.why}",
                                    Qt.ItemDataRole.ToolTipRole)

    def source_text(self) -> str:
        return self.source.currentText().strip()

    def set_source(self, source: str) -> None:
        self.source.setEditText(source)

    def request_load(self) -> None:
        if self.source_text():
            self.load_requested.emit(self.source_text(), self.pp.value())

    def set_busy(self, busy: bool, text: str = "") -> None:
        self.progress.setVisible(busy)
        self.cancel.setVisible(busy)
        self.progress_text.setVisible(busy)
        self.progress_text.setText(text)
        self.load_button.setEnabled(not busy)

    def show_progress(self, text: str) -> None:
        self.progress_text.setText(text[:90] + ("…" if len(text) > 90 else ""))

    def show_model(self, layer_map: LayerMap | None) -> None:
        if layer_map is None:
            self.name.setText("No model")
            self.facts.setText("")
            return
        self.name.setText(layer_map.name)
        self.facts.setText(model_facts(layer_map))
        note = family_note(layer_map)
        if note:
            self.facts.setToolTip(model_facts(layer_map) + "\n\n" + note[0].upper() + note[1:] + ".")
        self.name.setToolTip(f"source: {layer_map.source}")
        if self.pp.value() != layer_map.pp_size:
            self.pp.blockSignals(True)
            self.pp.setValue(layer_map.pp_size)
            self.pp.blockSignals(False)

    def _pick_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a model's config.json or GGUF file", "",
                                              "Models (*.json *.gguf);;All files (*)")
        if path:
            self.set_source(path)
            self.request_load()

    def _pick_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a model folder (with config.json)")
        if path:
            self.set_source(path)
            self.request_load()
