"""The window's menu bar and shortcuts: File (open a config, folder or GGUF; recent models; export
the session report; quit), View (demo mode) and Help (about, with the versions really installed)."""

from __future__ import annotations

from html import escape

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox

from bringup.app.settings import clear_recent_models, recent_models


def build_menu_bar(window) -> dict[str, QAction]:
    """Menus for a MainWindow; returns the actions by name (tests and the tabs use them)."""
    bar = window.menuBar()
    actions: dict[str, QAction] = {}

    def add(menu: QMenu, name: str, text: str, slot, shortcut=None) -> QAction:
        action = QAction(text, window)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)
        actions[name] = action
        return action

    file_menu = bar.addMenu("&File")
    add(file_menu, "open_config", "Open &config.json…", window.model_bar._pick_file, QKeySequence.StandardKey.Open)
    add(file_menu, "open_folder", "Open model &folder…", window.model_bar._pick_folder, "Ctrl+Shift+O")
    add(file_menu, "open_gguf", "Open &GGUF file…", lambda: _pick_gguf(window))
    recent = file_menu.addMenu("Open &recent")
    recent.aboutToShow.connect(lambda: fill_recent_menu(window, recent))
    fill_recent_menu(window, recent)
    window.recent_menu = recent
    file_menu.addSeparator()
    add(file_menu, "export_report", "&Export session report…", lambda: _export_report(window), "Ctrl+E")
    file_menu.addSeparator()
    add(file_menu, "quit", "&Quit", window.close, QKeySequence.StandardKey.Quit)
    if actions["quit"].shortcut().isEmpty():  # some platforms define no Quit key
        actions["quit"].setShortcut(QKeySequence("Ctrl+Q"))

    view_menu = bar.addMenu("&View")
    add(view_menu, "demo", "&Demo mode (full screen)", lambda: _demo(window), "F11")

    help_menu = bar.addMenu("&Help")
    add(help_menu, "about", "&About Bring-up Workbench", lambda: show_about(window))
    return actions


def fill_recent_menu(window, menu: QMenu) -> None:
    menu.clear()
    items = recent_models()
    for i, source in enumerate(items):
        shown = source.replace("&", "&&")  # a literal & in a path is not a mnemonic
        action = menu.addAction(f"&{i + 1}  {shown}" if i < 9 else shown)
        action.setToolTip(source)
        action.triggered.connect(lambda _c=False, s=source: window.load(s, 1))
    if not items:
        menu.addAction("(no recent models)").setEnabled(False)
    else:
        menu.addSeparator()
        menu.addAction("Clear the list").triggered.connect(lambda: clear_recent_models())


def _pick_gguf(window) -> None:
    path, _ = QFileDialog.getOpenFileName(window, "Open a GGUF model file", "", "GGUF (*.gguf);;All files (*)")
    if path:
        window.load(path, window.model_bar.pp.value())


def _export_report(window) -> None:
    run = window.tab("Run")
    if run is None or not hasattr(run, "_ask_report_path"):
        window.banner.show_message("The session report comes from the Run tab, which is not open in this window.")
        return
    run._ask_report_path()


def _demo(window) -> None:
    run = window.tab("Run")
    if run is None or not hasattr(run, "open_demo"):
        window.banner.show_message("Demo mode starts from the Run tab, which is not open in this window.")
        return
    run.open_demo()


def about_text() -> str:
    from PySide6 import __version__ as pyside_version
    from PySide6.QtCore import qVersion

    from bringup.core.versions import stack_versions

    rows = stack_versions() + [("Qt (runtime)", qVersion()), ("PySide6 (module)", pyside_version)]
    table = "".join(f"<tr><td>{escape(n)}</td><td>&nbsp;&nbsp;{escape(v)}</td></tr>" for n, v in rows)
    return ("<h3>Bring-up Workbench</h3><p>Layer maps, validation, memory planning and a live engine for "
            "hybrid Mamba2 / attention models on XPU, CUDA and CPU.</p>"
            f"<table>{table}</table><p>Apache-2.0</p>")


def show_about(window) -> None:
    QMessageBox.about(window, "About Bring-up Workbench", about_text())
