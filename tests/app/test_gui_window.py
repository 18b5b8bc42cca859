"""The main window: background loading, errors in the window, cancel, and the tab contract."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from bringup.app import tabs as tab_registry
from bringup.app.layermap.highlight import Highlight
from bringup.app.main_window import MainWindow

from gui_helpers import NANO, NANO_ATTENTION, SHARED_MODELS


class ContractTab(QWidget):
    """The smallest tab that follows the contract in bringup.app.tabs."""

    title = "Contract"
    highlight_requested = Signal(object)
    select_requested = Signal(int)

    def __init__(self) -> None:
        super().__init__()
        self.maps = []
        self.selected = []

    def set_layer_map(self, layer_map) -> None:
        self.maps.append(layer_map)

    def set_selected_layer(self, layer) -> None:
        self.selected.append(layer)

    def open_file(self, path: str) -> None:
        self.opened = path


@pytest.fixture
def window(qtbot, monkeypatch):
    # Only our own tabs: the other parts' tabs are tested by their owners.
    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", ["bringup.app.tabs.layers_tab:LayersTab"])
    w = MainWindow()
    qtbot.addWidget(w)
    w.resize(1440, 900)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.loader.wait()


def load(window, qtbot, source, pp=1):
    with qtbot.waitSignal(window.settled, timeout=10000):
        window.load(source, pp)


def test_loads_catalogue_model_in_background_and_fills_bar_map_and_tabs(window, qtbot):
    steps = []
    window.loader.progress.connect(steps.append)
    load(window, qtbot, NANO)
    assert steps and any(NANO in s for s in steps)  # the loader's own step messages reach the bar
    assert window.layer_map.name == NANO
    assert window.model_bar.name.text() == NANO
    facts = window.model_bar.facts.text()
    assert "nemotron_h" in facts and "52 layers" in facts and "31.6 B params" in facts and "3.58 B active" in facts
    assert not window.model_bar.progress.isVisible() and window.model_bar.load_button.isEnabled()
    assert window.map_panel.view.first_paint_done
    assert window.tab("Layers").model.rowCount() == 52
    assert window.windowTitle().endswith(NANO)
    # The catalogue is in the drop-down.
    items = [window.model_bar.source.itemText(i) for i in range(window.model_bar.source.count())]
    assert NANO in items


@pytest.mark.parametrize("name", ["LiquidAI__LFM2-2.6B.json", "openai__gpt-oss-20b.json", "nvidia__Nemotron-H-56B-Base-8K.json"])
def test_loads_real_config_files(window, qtbot, name):
    load(window, qtbot, str(SHARED_MODELS / name))
    assert window.layer_map is not None and not window.banner.isVisible()
    assert len(window.map_panel.view.map_layout().cells) == window.layer_map.num_layers


def test_bad_source_shows_the_error_in_the_window(window, qtbot, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{ this is not json")
    load(window, qtbot, str(bad))
    text = window.banner.text()
    assert window.banner.isVisible() and str(bad) in text and "Traceback" not in text
    assert window.layer_map is None
    load(window, qtbot, str(tmp_path / "missing-folder"))
    assert "missing-folder" in window.banner.text()
    load(window, qtbot, NANO)  # a good load clears the banner
    assert not window.banner.isVisible()


def test_cancel_returns_control_and_ignores_the_late_result(window, qtbot):
    cancelled = []
    window.loader.cancelled.connect(cancelled.append)
    window.load(NANO)
    assert window.model_bar.cancel.isVisibleTo(window)
    window.model_bar.cancel.click()
    assert cancelled == [NANO]
    assert window.model_bar.load_button.isEnabled() and not window.model_bar.cancel.isVisibleTo(window)
    window.loader.wait()
    qtbot.wait(50)
    assert window.layer_map is None


def test_tab_contract_layer_map_highlight_and_selection(window, qtbot):
    tab = ContractTab()
    window.add_tab(tab)
    load(window, qtbot, NANO)
    assert tab.maps[-1] is window.layer_map
    tab.highlight_requested.emit(Highlight(requested=[0], related=NANO_ATTENTION, message="layer 0 is Mamba2"))
    assert window.map_panel.state.highlight.requested == [0]
    tab.highlight_requested.emit(None)
    assert window.map_panel.state.highlight is None
    tab.select_requested.emit(19)
    assert window.map_panel.state.selected == ("layer", 19)
    assert tab.selected[-1].index == 19


def test_layers_tab_and_map_select_each_other(window, qtbot):
    load(window, qtbot, NANO)
    layers = window.tab("Layers")
    layers.table.selectRow(26)
    assert window.map_panel.state.selected == ("layer", 26)
    window.map_panel.state.select_layer(33)
    assert layers.table.currentIndex().row() == 33 or layers.table.selectionModel().selectedRows()[0].row() == 33
    layers.find.setText("attention")
    assert layers.proxy.rowCount() == 6
    layers.find.setText("5")
    assert layers.proxy.rowCount() == 1


def test_a_tab_that_fails_to_import_becomes_an_error_tab(qtbot, monkeypatch):
    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", ["bringup.app.tabs.no_such_tab:Nothing",
                                                        "bringup.app.tabs.layers_tab:LayersTab"])
    w = MainWindow()
    qtbot.addWidget(w)
    w.build_tabs()
    assert w.tabs.count() == 2
    assert "could not be loaded" in w.tabs.widget(0).text()
    assert w.tab("Layers") is not None


@pytest.mark.parametrize("path", sorted(SHARED_MODELS.glob("*.json")), ids=lambda p: p.stem)
def test_every_real_config_draws_a_map_or_says_why(window, qtbot, path):
    load(window, qtbot, str(path))
    if window.banner.isVisible():  # a family not supported yet: a clean message, not a crash report
        assert "bug in the workbench" not in window.banner.text() and "Traceback" not in window.banner.text()
        assert window.layer_map is None
    else:
        layout = window.map_panel.view.map_layout()
        assert len(layout.cells) == window.layer_map.num_layers + len(window.layer_map.mtp_layers)
        assert window.model_bar.name.text() == window.layer_map.name


def test_open_tab_hands_the_file_to_the_tab_or_says_why(window, qtbot):
    window.build_tabs()
    tab = ContractTab()
    window.add_tab(tab)
    assert window.open_tab("contract", "/tmp/some.log") == ""
    assert window.tabs.currentWidget() is tab and tab.opened == "/tmp/some.log"
    problem = window.open_tab("Nonexistent")
    assert "no tab called 'Nonexistent'" in problem and "Layers, Contract" in problem and window.banner.isVisible()
    assert "does not open files" in window.open_tab("Layers", "/tmp/x.log")


def test_map_keeps_its_whole_height_when_the_window_narrows(window, qtbot):
    load(window, qtbot, str(SHARED_MODELS / "nvidia__Nemotron-H-56B-Base-8K.json"))
    lines_before = len(window.map_panel.view.map_layout().lines)
    map_before = window.splitter.sizes()[0]
    window.resize(1000, 900)
    qtbot.waitUntil(lambda: len(window.map_panel.view.map_layout().lines) > lines_before, timeout=2000)

    def fitted():  # the map gets its height, up to 62% of the split (then it scrolls)
        sizes = window.splitter.sizes()
        return sizes[0] > map_before and sizes[0] == min(window.map_panel.preferred_height(), int(sum(sizes) * 0.62))

    qtbot.waitUntil(fitted, timeout=2000)


def test_changing_pp_keeps_the_selection_and_the_marks(window, qtbot):
    load(window, qtbot, NANO)
    state = window.map_panel.state
    state.select_layer(12)
    window.map_panel.set_highlight(Highlight(requested=[0], related=NANO_ATTENTION, message="layer 0"))
    with qtbot.waitSignal(window.settled, timeout=10000):
        window.model_bar.pp.setValue(2)
    assert window.layer_map.pp_size == 2 and {b.stage for b in window.map_panel.view.map_layout().bands} == {0, 1}
    assert state.selected == ("layer", 12) and state.highlight.requested == [0]
    assert "Layer 12" in window.map_panel.details.text()
    load(window, qtbot, str(SHARED_MODELS / "openai__gpt-oss-20b.json"))  # another model starts clean
    assert state.selected is None and state.highlight is None


def test_dropping_a_config_on_the_map_loads_it(window, qtbot, tmp_path):
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent

    def drop(path):
        mime = QMimeData()
        mime.setUrls([QUrl.fromLocalFile(str(path))])
        event = QDropEvent(QPointF(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                           Qt.KeyboardModifier.NoModifier)
        window.map_panel.dropEvent(event)
        return event.isAccepted()

    log = tmp_path / "engine.log"
    log.write_text("a log is not a model")
    assert not drop(log)  # left for the Diagnose tab's window-wide drop
    with qtbot.waitSignal(window.settled, timeout=10000):
        assert drop(SHARED_MODELS / "openai__gpt-oss-20b.json")
    assert window.layer_map.model_type == "gpt_oss"
