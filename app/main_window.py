"""The main window: the model bar, the layer map under it, then the tabs (Validate, Plan, Run, ...).

Tabs plug in through `bringup.app.tabs.TAB_FACTORIES` (see that module for the contract). They are
built after the first map is painted, so their imports never delay it; a tab that fails to import
becomes a tab showing the error, and the rest of the window works.
"""

from __future__ import annotations

import sys
import traceback

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QSplitter,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from bringup.app.launch_state import LaunchState
from bringup.app.layermap.panel import LayerMapPanel
from bringup.app.leftover_bar import LeftoverEnginesBar
from bringup.app.loader import ModelLoader
from bringup.app.model_bar import ModelBar, RunningBadge
from bringup.app.settings import add_recent_model, app_settings
from bringup.app.tabs.contract import SharesLaunchSettings
from bringup.app.theme import STYLE
from bringup.core.layermap.vocabulary import LayerMap


def app_icon() -> QIcon:
    """packaging/'s icon, as shipped in the package (resources/ links to it)."""
    from importlib.resources import files

    icon = files("bringup.resources") / "io.github.bringup.Workbench.svg"
    return QIcon(str(icon)) if icon.is_file() else QIcon()


class ErrorBanner(QFrame):
    """A dismissible message under the model bar: what went wrong and what to do."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.label = QLabel()
        self.label.setObjectName("errorText")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 6, 6)
        row.addWidget(self.label, 1)
        row.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_message(self, text: str) -> None:
        self.label.setText(text)
        self.show()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""


class _ErrorTab(QLabel):
    """Stands in for a tab whose module failed to import."""

    def __init__(self, spec: str, error: str) -> None:
        super().__init__(f"This tab could not be loaded ({spec}):\n\n{error}")
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.setMargin(16)
        self.title = spec.rpartition(":")[2]

    def set_layer_map(self, layer_map) -> None:
        pass


class MainWindow(QMainWindow):
    model_changed = Signal(object)  # LayerMap | None
    settled = Signal()  # a load ended (shown, failed or cancelled) and the tabs exist

    def __init__(self, parent: QWidget | None = None, *, build_tabs: bool = True, remember: bool = False) -> None:
        super().__init__(parent)
        self.setWindowTitle("Bring-up Workbench")
        self.setWindowIcon(app_icon())
        self.setStyleSheet(STYLE)
        self.remember = remember  # only the real app (bringup gui) remembers: scripts and screenshots must not change it
        self.confirm_quit = remember  # the real app asks before losing a session; scripts and tests close at once
        self._restore_tab: str | None = None
        self._closing = False
        self.layer_map: LayerMap | None = None
        self.tabs_built = False
        self._want_tabs = build_tabs
        self._settle_pending = False
        self._fitted_for = 0  # the map height the splitter was last fitted to

        self.launch_state = LaunchState(self)  # the launch settings every tab shares (Validate checks, Run starts)
        self.model_bar = ModelBar()
        self.running = RunningBadge()  # what the engine runs, and whether the map shows it
        self.running.switch_requested.connect(lambda source: self.load(source))
        self.banner = ErrorBanner()
        self.leftovers = LeftoverEnginesBar()
        self.map_panel = LayerMapPanel()
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(self.map_panel)
        self.splitter.addWidget(self.tabs)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)

        central = QWidget()
        central.setObjectName("central")
        box = QVBoxLayout(central)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        box.addWidget(self.model_bar)
        box.addWidget(self.running)
        banner_box = QVBoxLayout()
        banner_box.setContentsMargins(12, 6, 12, 0)
        banner_box.addWidget(self.banner)
        banner_box.addWidget(self.leftovers)
        box.addLayout(banner_box)
        box.addWidget(self.splitter, 1)
        self.setCentralWidget(central)
        self.statusBar().setSizeGripEnabled(False)

        self.loader = ModelLoader(self)
        self.loader.progress.connect(self.model_bar.show_progress)
        self.loader.loaded.connect(self._on_loaded)
        self.loader.failed.connect(self._on_failed)
        self.loader.cancelled.connect(self._on_cancelled)
        self.model_bar.load_requested.connect(self.load)
        self.model_bar.cancel_requested.connect(self.loader.cancel)
        self.map_panel.state.selection_changed.connect(self._on_selection)
        self.map_panel.model_dropped.connect(lambda path: self.load(path, self.model_bar.pp.value()))
        # Zoom, a highlight callout or wrapping change the map's height: refit the splitter.
        self.map_panel.view.height_changed.connect(lambda _h: QTimer.singleShot(0, lambda: self._fit_map(force=False)))
        self.map_panel.view.painted.connect(self._after_paint, Qt.ConnectionType.QueuedConnection)
        from bringup.app.menu_bar import build_menu_bar

        self.actions_by_name = build_menu_bar(self)
        self._user_sized_splitter = False
        self.splitter.splitterMoved.connect(lambda *_: setattr(self, "_user_sized_splitter", True))
        QTimer.singleShot(0, self.leftovers.check)  # engines an earlier, killed window left behind

    # --- what the window remembers -------------------------------------------------------------
    def restore_state(self) -> None:
        """Size and position (kept on screen), the map/tabs split, and (once the tabs exist) the last tab."""
        from bringup.app.window_placement import place

        s = app_settings()
        place(self, s.value("window/geometry"))
        split = s.value("window/splitter")
        if split is not None and self.splitter.restoreState(split):
            self._user_sized_splitter = True
        self._restore_tab = s.value("window/tab") or None

    def save_state(self) -> None:
        if not self.remember:
            return
        s = app_settings()
        s.setValue("window/geometry", self.saveGeometry())
        if self._user_sized_splitter:
            s.setValue("window/splitter", self.splitter.saveState())
        current = self.tabs.currentWidget()
        if current is not None:
            s.setValue("window/tab", getattr(current, "title", ""))
        for tab in self.tab_widgets():
            save = getattr(tab, "save_state", None)
            if callable(save):
                save(s)
        s.sync()

    # --- loading ------------------------------------------------------------------------------
    def load(self, source: str, pp: int = 1) -> None:
        if self._closing:
            return  # hiding an editable combo box can fire `activated`: no load may start as the window goes
        if self.loader.busy and self.loader.current_request() == (source, pp):
            return  # the same request again (Enter and the drop-down both fire): one load is enough
        self.model_bar.set_source(source)
        self.model_bar.set_busy(True, f"loading {source}…")
        self.loader.load(source, pp)

    def _on_loaded(self, layer_map: LayerMap) -> None:
        self.model_bar.set_busy(False)
        self.banner.hide()
        if self.remember and layer_map.source:
            add_recent_model(self.model_bar.source_text() or layer_map.source)
        self.show_layer_map(layer_map)
        origin = f" from {layer_map.source}" if layer_map.source and layer_map.source != layer_map.name else ""
        self.statusBar().showMessage(f"Loaded {layer_map.name}{origin}", 6000)

    def _on_failed(self, text: str) -> None:
        self.model_bar.set_busy(False)
        self.banner.show_message(text)
        self._settle_soon()

    def _on_cancelled(self, source: str) -> None:
        self.model_bar.set_busy(False)
        self.statusBar().showMessage(f"Loading {source} was cancelled", 6000)
        self._settle_soon()

    def show_layer_map(self, layer_map: LayerMap | None) -> None:
        """Show a model: the bar, the map, and every tab (they all get the same LayerMap)."""
        self.layer_map = layer_map
        self.model_bar.show_model(layer_map)
        self.running.show_running(self.running.served, layer_map)
        self.map_panel.set_layer_map(layer_map)
        self.setWindowTitle(f"Bring-up Workbench — {layer_map.name}" if layer_map else "Bring-up Workbench")
        if not self._user_sized_splitter:
            self._fit_map()
        for tab in self.tab_widgets():
            self._call_tab(tab, "set_layer_map", layer_map)
        self.model_changed.emit(layer_map)
        self._settle_pending = True
        if self.map_panel.view.isVisible():
            self.map_panel.view.update()
        else:
            self._settle_soon()

    def show_running(self, served) -> None:
        """The engine's model (a ServedModel from /server_info, None: none runs): named under the
        model bar, with a one-click switch when the map shows another model."""
        self.running.show_running(served, self.layer_map)
        title = f"Bring-up Workbench — {self.layer_map.name}" if self.layer_map else "Bring-up Workbench"
        self.setWindowTitle(title + (f" (running: {served.name})" if served is not None else ""))

    def _fit_map(self, *, force: bool = True) -> None:
        """Give the map the height it needs; the tabs get the rest. A resize refits only when
        the map's own height changed (it wraps), so a splitter the user dragged stays put."""
        preferred = self.map_panel.preferred_height()
        if not force and preferred == self._fitted_for:
            return
        if self._user_sized_splitter and not force:
            return  # the user's split (dragged, or remembered) wins over the fit
        self._fitted_for = preferred
        total = sum(self.splitter.sizes()) or self.height()
        want = min(preferred, int(total * 0.62))
        self.splitter.setSizes([want, max(120, total - want)])

    def _after_paint(self) -> None:
        if self._settle_pending:
            self._settle_soon()

    def _settle_soon(self) -> None:
        self._settle_pending = False
        QTimer.singleShot(0, self._settle)

    def _settle(self) -> None:
        if self._want_tabs and not self.tabs_built:
            self.build_tabs()
        self.settled.emit()

    # --- tabs --------------------------------------------------------------------------------
    def build_tabs(self) -> None:
        from bringup.app.tabs import TAB_FACTORIES, load_factory

        self.tabs_built = True
        for spec in TAB_FACTORIES:
            try:
                tab = load_factory(spec)()
            except Exception as err:  # another part's bug must not keep the window from opening
                traceback.print_exc(file=sys.stderr)
                tab = _ErrorTab(spec, f"{type(err).__name__}: {err}")
            self.add_tab(tab)
        self._wire_tabs()
        s = app_settings()
        for tab in self.tab_widgets():
            restore = getattr(tab, "restore_state", None)
            if callable(restore):
                restore(s)
        if self._restore_tab:
            target = self.tab(self._restore_tab)
            if target is not None:
                self.tabs.setCurrentWidget(target)

    def _wire_tabs(self) -> None:
        """Tabs that feed each other: validated settings launch the engine, a crash log is diagnosed."""
        run, diagnose, validate = self.tab("Run"), self.tab("Diagnose"), self.tab("Validate")
        if run is not None and validate is not None and hasattr(validate, "probe_finished"):
            validate.probe_finished.connect(
                lambda report: run.set_available_devices(report.available_devices() if report is not None else None))
        if run is not None and hasattr(run, "running_changed"):  # the header follows what runs
            run.running_changed.connect(self.show_running)
        if run is not None and diagnose is not None and hasattr(run, "crash_log"):
            run.crash_log.connect(lambda text: diagnose.set_text(text, "engine log"))
        numerics = self.tab("Numerics")
        if run is not None and numerics is not None and hasattr(run, "tensor_dump_started"):
            run.tensor_dump_started.connect(numerics.dump_folder.setText)  # ready for "Compare dump"
        compare = self.tab("Compare")
        if run is not None and compare is not None and hasattr(run, "controller"):
            run.controller.ready.connect(compare.use_running)  # the engine the Run tab started is A, ready to compare
            if hasattr(run, "tensor_dump_started"):
                run.tensor_dump_started.connect(compare.use_dump)  # its layer dump is setting A of "Compare layers"

    def add_tab(self, tab: QWidget) -> None:
        """Add a tab that follows the contract in `bringup.app.tabs`, and hand it the current model."""
        self.tabs.addTab(tab, getattr(tab, "title", type(tab).__name__))
        if hasattr(tab, "highlight_requested"):
            tab.highlight_requested.connect(self.map_panel.set_highlight)
        if hasattr(tab, "select_requested"):
            tab.select_requested.connect(self.map_panel.state.select_layer)
        if isinstance(tab, SharesLaunchSettings):  # Validate, Plan and Run edit and read the same settings
            tab.set_launch_state(self.launch_state)
        self._call_tab(tab, "set_layer_map", self.layer_map)

    def tab_widgets(self) -> list[QWidget]:
        return [self.tabs.widget(i) for i in range(self.tabs.count())]

    def tab(self, title: str) -> QWidget | None:
        for tab in self.tab_widgets():
            if getattr(tab, "title", None) == title:
                return tab
        return None

    def open_tab(self, title: str, path: str | None = None) -> str:
        """Make the tab called `title` current and hand it `path` (its `open_file`). Returns ''
        or what went wrong, which is also shown in the window."""
        tab = next((t for t in self.tab_widgets() if getattr(t, "title", "").lower() == title.lower()), None)
        problem = ""
        if tab is None:
            titles = ", ".join(getattr(t, "title", "?") for t in self.tab_widgets())
            problem = f"there is no tab called {title!r}; the tabs are: {titles}"
        else:
            self.tabs.setCurrentWidget(tab)
            if path is not None:
                if hasattr(tab, "open_file"):
                    self._call_tab(tab, "open_file", path)
                else:
                    problem = f"the {tab.title} tab does not open files; pick another tab for {path}"
        if problem:
            self.banner.show_message(problem)
        return problem

    def _call_tab(self, tab: QWidget, method: str, value) -> None:
        fn = getattr(tab, method, None)
        if fn is None:
            return
        try:
            fn(value)
        except Exception as err:  # show, don't crash: the map and the other tabs stay usable
            traceback.print_exc(file=sys.stderr)
            self.banner.show_message(f"The {getattr(tab, 'title', 'tab')} tab failed to update: {type(err).__name__}: {err}")

    def _on_selection(self, layer) -> None:
        for tab in self.tab_widgets():
            self._call_tab(tab, "set_selected_layer", layer)

    # --- lifetime ----------------------------------------------------------------------------
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.layer_map is not None:
            QTimer.singleShot(0, lambda: self._fit_map(force=False))

    def _quit_allowed(self) -> bool:
        """Ask before a session with chat, load runs or findings is lost; Export report first offers the file."""
        from bringup.app.session_guard import ask_before_quit, session_contents

        held = session_contents(self)
        if not held:
            return True
        box = ask_before_quit(self, held)
        self.quit_question = box  # for tests and scripts: the box while it is asked
        box.exec()
        self.quit_question = None
        clicked = box.clickedButton()
        if clicked is box.export_button:
            run = self.tab("Run")
            if run is not None:
                run._ask_report_path()
            return False  # exported (or not): the window stays; Quit again to leave
        return clicked is box.quit_button

    def showEvent(self, event) -> None:  # noqa: N802 (Qt)
        self._closing = False
        super().showEvent(event)

    def closeEvent(self, event) -> None:
        if self.confirm_quit and not self._quit_allowed():
            event.ignore()
            return
        self._closing = True
        self.save_state()
        for tab in self.tab_widgets():  # engines and probes are child processes: end them now
            shutdown = getattr(tab, "shutdown", None)
            if callable(shutdown):
                shutdown()
        self.loader.cancel()
        self.loader.wait(2000)
        super().closeEvent(event)
