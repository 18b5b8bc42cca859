"""Desktop conventions people rely on: labels that never widen the window, a window that opens on
the screen and remembers itself, menus and shortcuts, the icon, versions from the installed
metadata, exit codes, and figures that say what is true."""

import json
import subprocess
import sys

import pytest
from PySide6.QtCore import QRect
from PySide6.QtWidgets import QMainWindow

from bringup.app.elided_label import ElidedLabel
from gui_helpers import SHARED_MODELS

LONG = "HTTP 500: " + "the server could not do that because " * 120  # ~4,500 characters, one line


# --- layout that never grows with content --------------------------------------------------------

def test_a_page_long_chat_error_does_not_widen_the_window(qtbot):
    from bringup.app.tabs.run_tab import RunTab

    window = QMainWindow()
    qtbot.addWidget(window)
    tab = RunTab()
    window.setCentralWidget(tab)
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    before = window.minimumSizeHint().width()
    tab.chat.figures.setText(f"error: {LONG}")
    tab.stage.setText(f"<b>Engine exited with code 2</b> · {LONG}")
    tab._set_reason(LONG)
    qtbot.wait(50)
    assert window.minimumSizeHint().width() <= before and window.width() == 1024
    assert tab.start_button.geometry().right() < tab.width()  # Start stays on screen
    shown = tab.chat.figures.shown_text()
    assert shown.endswith("…") and len(shown) < len(LONG)
    assert tab.chat.figures.text() == f"error: {LONG}" and LONG in tab.chat.figures.toolTip()  # whole on hover
    assert tab.reason.text() == LONG  # the reason wraps in full


def test_elided_label_copies_the_whole_text(qtbot):
    from PySide6.QtGui import QGuiApplication

    label = ElidedLabel("<b>Ready</b> · " + "x" * 500)
    qtbot.addWidget(label)
    label.resize(200, 20)
    label.show()
    assert label.shown_text().endswith("…")
    QGuiApplication.clipboard().setText("")
    label.copy_full_text()  # what the label's context menu "Copy" does
    assert QGuiApplication.clipboard().text() == "Ready · " + "x" * 500


def test_a_crash_reason_is_shown_whole(qtbot, tmp_path):
    """A config-only folder: the engine's refusal is long, and it is shown whole, not cut at 160."""
    from bringup.app.tabs.run_tab import RunTab

    folder = tmp_path / "config-only"
    folder.mkdir()
    (folder / "config.json").write_text((SHARED_MODELS / "Qwen__Qwen3-8B.json").read_text())
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.resize(1024, 600)
    tab.show()
    tab.model_field.setText(str(folder))
    tab.device.setCurrentText("cpu")
    with qtbot.waitSignal(tab.controller.crashed, timeout=60000) as crashed:
        tab.start()
    refusal = next(line for line in crashed.args[1] if line.startswith("bringup serve:"))
    assert len(refusal) > 160
    assert refusal in tab.reason.text() and tab.reason.isVisibleTo(tab)
    assert "exited with code 2" in tab.stage.text()


# --- the window on the screen, and what it remembers ------------------------------------------------

def test_placement_keeps_the_window_on_a_small_screen():
    from bringup.app.window_placement import default_rect, fit_rect

    small = QRect(0, 0, 1366, 728)  # a 1366x768 screen less its panel
    first = default_rect(small)
    assert small.contains(first) and first.width() <= 1366 and first.height() <= 728
    off = fit_rect(QRect(900, 500, 1440, 900), small)  # remembered on a big monitor, now undocked
    assert small.contains(off)
    assert default_rect(QRect(0, 0, 2560, 1400)).size().toTuple() == (1440, 900)


def test_window_remembers_size_position_splitter_tab_and_recent_models(qtbot, monkeypatch, tmp_path):
    from bringup.app import settings as app_settings_module
    from bringup.app import tabs as tab_registry
    from bringup.app.main_window import MainWindow

    monkeypatch.setenv("BRINGUP_SETTINGS", str(tmp_path / "settings.ini"))
    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", ["bringup.app.tabs.layers_tab:LayersTab",
                                                         "bringup.app.tabs.diagnose_tab:DiagnoseTab"])
    nano = str(SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json")

    w = MainWindow(remember=True)
    qtbot.addWidget(w)
    w.restore_state()  # nothing saved yet: the default size, within the screen
    area = w.screen().availableGeometry()
    assert area.contains(w.geometry())
    w.show()
    with qtbot.waitSignal(w.settled, timeout=10000):
        w.load(nano)
    # The offscreen screen is 800x800, narrower than the window can be: the narrowest window, 600 high.
    w.setGeometry(QRect(area.x(), area.y() + 20, w.minimumSizeHint().width(), 600))
    saved_geometry = w.geometry()
    w.splitter.setSizes([150, 400])
    w.splitter.splitterMoved.emit(150, 1)
    w.tabs.setCurrentWidget(w.tab("Diagnose"))
    saved_sizes = w.splitter.sizes()
    w.close()
    assert app_settings_module.recent_models()[0] == nano

    again = MainWindow(remember=True)
    qtbot.addWidget(again)
    again.restore_state()
    again.show()
    with qtbot.waitSignal(again.settled, timeout=10000):
        again.load(nano)
    got = again.geometry()  # not the default (94 % of the screen's height); a frame may shift it a few pixels
    assert got.height() == 600 and abs(got.x() - saved_geometry.x()) <= 8 and abs(got.y() - saved_geometry.y()) <= 8
    assert again.splitter.sizes() == saved_sizes
    assert again.tabs.currentWidget() is again.tab("Diagnose")
    again.recent_menu.aboutToShow.emit()
    texts = [a.text() for a in again.recent_menu.actions()]
    assert any(nano in t for t in texts) and "Clear the list" in texts
    again.close()


def test_recent_models_are_newest_first_and_capped(monkeypatch, tmp_path):
    from bringup.app.settings import RECENT_MAX, add_recent_model, recent_models

    monkeypatch.setenv("BRINGUP_SETTINGS", str(tmp_path / "s.ini"))
    for i in range(RECENT_MAX + 3):
        add_recent_model(f"model-{i}")
    add_recent_model("model-5")
    got = recent_models()
    assert got[0] == "model-5" and len(got) == RECENT_MAX and got.count("model-5") == 1


# --- menus, shortcuts, icon, versions ----------------------------------------------------------------

def test_menu_bar_shortcuts_icon_and_about(qtbot, monkeypatch):
    from bringup.app import tabs as tab_registry
    from bringup.app.main_window import MainWindow
    from bringup.app.menu_bar import about_text
    from bringup.core.versions import bringup_version

    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", ["bringup.app.tabs.run_tab:RunTab"])
    w = MainWindow(remember=False)
    qtbot.addWidget(w)
    menus = [a.text().replace("&", "") for a in w.menuBar().actions()]
    assert menus == ["File", "View", "Help"]
    keys = {name: a.shortcut().toString() for name, a in w.actions_by_name.items()}
    assert keys["open_config"] == "Ctrl+O" and keys["quit"] == "Ctrl+Q" and keys["demo"] == "F11"
    assert {"open_folder", "open_gguf", "export_report", "about"} <= set(keys)
    assert not w.windowIcon().pixmap(64).isNull()  # packaging/'s SVG, drawn
    text = about_text()
    assert bringup_version() in text and "PySide6" in text and "torch" in text and "Qt (runtime)" in text

    loads = []
    w.load = lambda source, pp=1: loads.append(source)  # the GGUF path goes on as a source, untouched
    monkeypatch.setattr("PySide6.QtWidgets.QFileDialog.getOpenFileName", lambda *a, **k: ("/models/x.gguf", ""))
    w.actions_by_name["open_gguf"].trigger()
    assert loads == ["/models/x.gguf"]


def test_version_comes_from_the_installed_package_and_help_lists_exit_codes():
    from importlib.metadata import version

    out = subprocess.run([sys.executable, "-m", "bringup", "--version"], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == f"bringup {version('bringup-workbench')}"
    helptext = subprocess.run([sys.executable, "-m", "bringup", "--help"], capture_output=True, text=True, timeout=30).stdout
    for code in ("0 ", "1 ", "2 ", "130", "141"):
        assert f"  {code}" in helptext
    sub = subprocess.run([sys.executable, "-m", "bringup", "inspect", "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "exit codes:" in sub


@pytest.mark.timeout(120)
def test_demo_screenshot_exits_non_zero_when_its_engine_failed(tmp_path):
    folder = tmp_path / "config-only"
    folder.mkdir()
    (folder / "config.json").write_text((SHARED_MODELS / "Qwen__Qwen3-8B.json").read_text())
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"title": "t", "model": str(folder), "device": "cpu", "prompts": ["hi"]}))
    shot = tmp_path / "demo.png"
    out = subprocess.run([sys.executable, "-m", "bringup", "demo", "--profile", str(profile), "--screenshot", str(shot),
                          "--after", "8"], capture_output=True, text=True, timeout=100)
    assert out.returncode == 1, out.stderr
    assert shot.is_file()  # the picture of the failure is still written
    assert "exited with code 2" in out.stderr or "not ready" in out.stderr


# --- figures that say what is true ------------------------------------------------------------------

def test_counts_never_print_an_exponent():
    from bringup.app.layermap.facts import human_count

    assert human_count(999_885_952) == "1.00 B"  # gemma-3-1b
    assert human_count(999_999) == "1.00 M" and human_count(999_499_999_999) == "999 B"
    assert human_count(31_577_937_344) == "31.6 B" and human_count(521_000_000) == "521 M"


def test_lfm2_family_label_says_it_is_sglangs_grouping():
    from bringup.app.layermap.facts import family_note, model_summary
    from bringup.app.model_bar import model_facts
    from bringup.core.sources.resolve import load_layer_map

    lfm2 = load_layer_map("LFM2-1.2B")
    assert "SGLang's grouping" in model_facts(lfm2) and "short conv" in model_facts(lfm2)
    assert "short convolutions" in family_note(lfm2)
    assert "short convolutions" in dict(model_summary(lfm2))["hybrid family"]
    nano = load_layer_map("NVIDIA-Nemotron-3-Nano-30B-A3B")
    assert family_note(nano) == "" and "hybrid: mamba2   ·" in model_facts(nano)


def test_gemma_shows_a_readable_parameter_count():
    from bringup.app.model_bar import model_facts
    from bringup.core.sources.resolve import load_layer_map

    assert "1.00 B params" in model_facts(load_layer_map("gemma-3-1b-it"))


def test_plots_put_legends_outside_and_draw_latency_as_points(qtbot):
    import pyqtgraph as pg

    from bringup.app.run.live_plots import LivePlots
    from bringup.core.client.metrics_scrape import EngineSample

    plots = LivePlots()
    qtbot.addWidget(plots)
    for w in plots._plots:
        item = w.getPlotItem()
        assert item.legend is None  # no legend box over the lines
        assert not any(isinstance(i, pg.LegendItem) for i in item.vb.addedItems)
    title = plots._plots[5].getPlotItem().titleLabel.text
    assert "time to first token" in title and "inter-token" in title
    # a TTFT every few scrapes (isolated points between gaps) is still drawn
    for i in range(6):
        plots.add_sample(EngineSample(t=float(i), ttft_s=0.05 if i in (1, 4) else None))
    plots.redraw()
    xs, ys = plots._curves["ttft_s"].getData()
    assert list(xs) == [1.0, 4.0] and list(ys) == pytest.approx([50.0, 50.0])
    assert plots._curves["ttft_s"].opts["symbol"] == "o" and plots._curves["ttft_s"].opts["pen"] is None


def test_a_118_layer_map_wraps_and_scrolls_in_a_1024x700_window(qtbot, monkeypatch):
    from bringup.app import tabs as tab_registry
    from bringup.app.main_window import MainWindow

    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", ["bringup.app.tabs.layers_tab:LayersTab",
                                                         "bringup.app.tabs.run_tab:RunTab"])
    w = MainWindow(remember=False)
    qtbot.addWidget(w)
    w.resize(1024, 700)
    w.show()
    with qtbot.waitSignal(w.settled, timeout=10000):
        w.load("Nemotron-H-56B-Base-8K")
    w.tabs.setCurrentWidget(w.tab("Run"))  # the busiest tab must not push the window wider
    qtbot.wait(50)
    assert w.width() == 1024 and w.minimumSizeHint().width() <= 1024
    view, scroll = w.map_panel.view, w.map_panel.scroll
    right = max(view.cell_center(i).x() for i in range(118))
    assert right < scroll.viewport().width()  # wrapped: every layer within the width, no sideways scrolling
    assert w.map_panel.height() >= 250  # the map keeps real room next to the tabs
    last = view.cell_center(117)
    if last.y() > scroll.viewport().height():  # the rest is a scroll away
        from bringup.app.layermap.highlight import Highlight

        w.map_panel.set_highlight(Highlight(requested=[117], related=[], message="last layer", severity="info"))
        qtbot.wait(20)
        assert scroll.verticalScrollBar().value() > 0
