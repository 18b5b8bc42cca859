"""The Run tab: launch or attach an engine, watch it start, graph its pools and tokens/s live,
chat with it, load it, and export the session. A crash goes straight to the diagnosis and the
layer map lights up the failing layer without a click."""

from __future__ import annotations

from html import escape
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QApplication, QComboBox, QFileDialog, QFrame, QHBoxLayout, QLabel, QLineEdit,
                               QMessageBox, QProgressBar, QPushButton, QScrollArea, QSizePolicy, QSpinBox, QSplitter,
                               QTabWidget, QVBoxLayout, QWidget)

from bringup.app.elided_label import ElidedLabel
from bringup.app.layermap.highlight import Highlight
from bringup.app.run.api_key_field import ApiKeyField
from bringup.app.run.chat_panel import ChatPanel
from bringup.app.run.engine_controller import EngineController, sglang_installed, vllm_installed
from bringup.app.run.tensor_dump_option import TensorDumpOption
from bringup.app.run.load_panel import LoadPanel
from bringup.app.run.log_console import LogConsole
from bringup.app.run.serve_source import serve_source_for
from bringup.core.client.running_label import ServedModel
from bringup.core.engine import facts as engine_facts
from bringup.core.launch import Launch
from bringup.core.layermap.vocabulary import LayerMap

# (label, key): the engines Run launches, then attaching to a server already running
ENGINES = (("Embedded engine", "embedded"), ("SGLang", "sglang"), ("vLLM", "vllm"), ("Attach to URL", "attach"))


def _traceback_end(lines: list[str], line: int) -> int:
    """A click inside a traceback (its header or an indented frame line) means the error line that
    ends it; any other line means itself. Lines are 1-based."""
    i = line - 1
    if not (0 <= i < len(lines)) or not (lines[i].startswith("Traceback") or lines[i][:1].isspace()):
        return line
    while i + 1 < len(lines) and (lines[i].startswith("Traceback") or lines[i][:1].isspace()):
        i += 1
    return i + 1
DEVICES = ("auto", *engine_facts.DEVICES)  # "auto": the engine picks


class RunTab(QWidget):
    title = "Run"
    highlight_requested = Signal(object)
    crash_log = Signal(str)  # the crashed engine's log, for the Diagnose tab
    tensor_dump_started = Signal(str)  # SGLang started dumping its layers into this folder (Numerics compares it)
    running_changed = Signal(object)  # the ServedModel now running (from /server_info), or None

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.layer_map: LayerMap | None = None
        self.controller = EngineController(self)
        self.crash_findings: list[dict] = []
        self.launch: Launch | None = None  # what the Validate tab checked: the next Start launches it
        self.plots = None  # LivePlots, built on first show (pyqtgraph costs start-up time)
        self.served = None  # ServedModel: what the engine really runs, once /server_info answered
        self.last_served = None  # ... and the session's last one, after it stopped (the report names it)

        # launch bar
        self.engine = QComboBox()
        for label, key in ENGINES:
            self.engine.addItem(label, key)
        for key, here, why in (("sglang", sglang_installed(), "SGLang is not installed in this environment"),
                               ("vllm", vllm_installed(), "vLLM is not installed: no `vllm` command in this "
                                                          "environment or on PATH")):
            if not here:  # offered only where it can be launched
                i = self.engine.findData(key)
                self.engine.model().item(i).setEnabled(False)
                self.engine.setItemData(i, why, Qt.ItemDataRole.ToolTipRole)
        self.engine.currentIndexChanged.connect(self._engine_changed)
        self.model_field = QLineEdit("default")
        self.model_field.setToolTip("What the engine serves: a checkpoint folder, a hub id, or 'default' "
                                    "(the bundled tiny checkpoint with Nemotron-3-Nano's layer pattern)")
        self.device = QComboBox()
        self.device.addItems(DEVICES)
        self.available_devices: set[str] | None = None  # from the probe; None until it reports
        self._device_picked = False  # chosen here by the user, not carried over from Validate
        self.device.activated.connect(lambda _i: setattr(self, "_device_picked", True))
        self.weights = QComboBox()  # --load-format of our engine
        self.weights.addItems(["checkpoint", "dummy"])
        self.weights.setToolTip("checkpoint: the model's own weights. dummy: the model's real architecture and size "
                                "with seeded random weights made on the device (works from a catalogue name or a "
                                "config.json alone; its text is noise)")
        self.port = QSpinBox()  # where the launched engine listens; 0: a free port
        self.port.setRange(0, 65535)
        self.port.setSpecialValueText("any port")  # a chosen one reads as the number: its tooltip says what it is
        self.port.setToolTip("The port the engine listens on (127.0.0.1); 'any free' picks one. A port in use "
                             "stops the engine with the busy-port message")
        self.dump_option = TensorDumpOption()  # SGLang only: its per-layer tensor dumps
        self.url_field = QLineEdit("http://127.0.0.1:30000")
        self.url_field.setToolTip("A running server (http:// or https://): ours, SGLang started with --enable-metrics, or vLLM")
        self.key_field = ApiKeyField()
        self.start_button = QPushButton("Start")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)
        self.demo_button = QPushButton("Demo")
        self.demo_button.setToolTip("Demo mode, full screen: the running model's map, gauges and pinned prompts")
        self.demo_button.clicked.connect(self.open_demo)
        self.report_button = QPushButton("Export report…")
        self.report_button.clicked.connect(self._ask_report_path)
        bar = QHBoxLayout()
        self._launch_fields: list[QWidget] = []  # shown for a launch
        self._attach_fields: list[QWidget] = []  # shown for an attach
        for label, w, stretch, group in (("Engine", self.engine, 0, None), ("Model", self.model_field, 2, "launch"),
                                         ("Device", self.device, 0, "launch"), ("Weights", self.weights, 0, "launch"),
                                         ("URL", self.url_field, 2, "attach"),
                                         ("Key", self.key_field, 1, "attach")):
            lab = QLabel(label)
            lab.setBuddy(w)
            bar.addWidget(lab)
            bar.addWidget(w, stretch)
            if group:
                (self._launch_fields if group == "launch" else self._attach_fields).extend([lab, w])
        bar.addWidget(self.port)
        self._launch_fields.append(self.port)
        bar.addWidget(self.dump_option, 1)
        for b in (self.start_button, self.stop_button, self.demo_button, self.report_button):
            bar.addWidget(b)

        # status line: one line each, elided (the whole text on hover and Copy); the reason for a
        # crash or a refused attach wraps below in full
        self.progress = QProgressBar(maximum=100, textVisible=False)
        self.progress.setMaximumHeight(8)
        self.stage = ElidedLabel("No engine running.")
        self.figures = ElidedLabel()
        self.reason = QLabel()
        self.reason.setWordWrap(True)
        self.reason.setTextFormat(Qt.TextFormat.PlainText)
        self.reason.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.reason.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        self.reason.setObjectName("runReason")
        self.reason.hide()
        status = QHBoxLayout()
        status.addWidget(self.stage, 3)
        status.addWidget(self.figures, 2)

        # graphs (left) and log / chat / load (right)
        self.plots_box = QWidget()
        self._plots_layout = QVBoxLayout(self.plots_box)
        self._plots_layout.setContentsMargins(0, 0, 0, 0)
        self.pause_button = QPushButton("Pause", checkable=True)
        self.clear_button = QPushButton("Clear")
        self.csv_button = QPushButton("Export CSV…")
        self.png_button = QPushButton("Export PNG…")
        plot_bar = QHBoxLayout()
        plot_bar.addWidget(ElidedLabel("<b>Live metrics</b> (drag to pan, wheel to zoom)"), 1)
        for b in (self.pause_button, self.clear_button, self.csv_button, self.png_button):
            plot_bar.addWidget(b)
        self._plots_layout.addLayout(plot_bar)
        self.log = LogConsole()
        self.chat = ChatPanel()
        self.load = LoadPanel()
        self.side = QTabWidget()
        self.side.addTab(self.log, "Log")
        self.side.addTab(self.chat, "Chat")
        self.side.addTab(self.load, "Load")
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setObjectName("runSplitter")
        split.addWidget(self.plots_box)
        split.addWidget(self.side)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        self.split = split

        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.progress)
        layout.addLayout(status)
        layout.addWidget(self.reason)
        # On a short window the graphs and the side panel scroll instead of taking the layer map's room.
        lower = QScrollArea()
        lower.setWidgetResizable(True)
        lower.setFrameShape(QFrame.Shape.NoFrame)
        lower.setWidget(split)
        lower.setMinimumHeight(120)
        layout.addWidget(lower, 1)

        c = self.controller
        c.log_line.connect(self.log.append)
        c.stage_changed.connect(self._on_stage)
        c.figures_changed.connect(self._on_figures)
        c.ready.connect(self._on_ready)
        c.crashed.connect(self._on_crash)
        c.stopped.connect(self._on_stopped)
        c.state_changed.connect(self._sync_buttons)
        c.server_info.connect(self._on_info)
        c.attach_failed.connect(self._on_attach_failed)
        c.lost.connect(self._on_lost)
        c.regained.connect(self._on_regained)
        self.url_field.editingFinished.connect(self._recall_key)
        self.log.diagnose_requested.connect(self.diagnose_text)
        self.log.line_clicked.connect(self.explain_line)
        app = QApplication.instance()
        if app is not None:  # orphans keep device memory: the engine never outlives the window
            app.aboutToQuit.connect(self.shutdown)
        self._engine_changed()
        self._sync_buttons()

    # tab contract
    def set_layer_map(self, layer_map: LayerMap | None) -> None:
        self.layer_map = layer_map
        if not self.controller.busy:
            self.model_field.setText(serve_source_for(layer_map))

    def set_launch_state(self, state) -> None:
        """Start what Validate approved: the shared launch settings' last `ValidationResult`."""
        self.launch_state = state
        state.validated.connect(lambda result: result is not None and self.apply_launch(result.launch))
        if state.launch is not None:
            self.apply_launch(state.launch)

    def apply_launch(self, launch: Launch) -> None:
        """The launch the Validate tab just checked (and shows as its command): the next Start runs it,
        with this tab's model and device (the model field keeps what runs here, see serve_source.py)."""
        if self.controller.busy:
            return
        self.launch = launch
        if launch.run_device in DEVICES and self._runs_here(launch.run_device):
            self.device.setCurrentText(launch.run_device)
        if launch.engine == "embedded":
            self.select_engine("embedded")
        elif self.engine.model().item(self.engine.findData(launch.engine)).isEnabled():
            self.select_engine(launch.engine)  # SGLang or vLLM, where it is installed

    def next_launch(self) -> Launch:
        """What Start launches: the validated launch (or plain settings) on this tab's engine, model and device."""
        from bringup.core.rules.settings import LaunchSettings

        engine = self.engine_key() if self.engine_key() in ("sglang", "vllm") else "embedded"
        settings = self.launch.settings if self.launch is not None else LaunchSettings(device="cpu")
        return Launch(engine, self.model_field.text().strip() or "default", settings, device=self.device.currentText())

    def engine_key(self) -> str:
        """embedded | sglang | vllm | attach: what Start does."""
        return self.engine.currentData()

    def select_engine(self, key: str) -> None:
        self.engine.setCurrentIndex(self.engine.findData(key))

    def set_available_devices(self, devices: list[str] | None) -> None:
        """The probe's devices. Validate may check a launch for a device this machine lacks (an XPU
        launch planned on a laptop); the Run tab launches here, so it keeps 'auto' instead."""
        self.available_devices = None if devices is None else {*devices, "auto"}
        if not self._device_picked and not self.controller.busy and not self._runs_here(self.device.currentText()):
            self.device.setCurrentText("auto")

    def _runs_here(self, device: str) -> bool:
        return self.available_devices is None or device in self.available_devices

    def showEvent(self, event) -> None:  # noqa: N802 (Qt)
        self.ensure_plots()
        super().showEvent(event)

    def ensure_plots(self):
        if self.plots is None:
            from bringup.app.run.live_plots import LivePlots

            self.plots = LivePlots()
            self._plots_layout.addWidget(self.plots, 1)
            self.controller.sample.connect(self.plots.add_sample)
            self.pause_button.toggled.connect(self.plots.set_paused)
            self.clear_button.clicked.connect(self.plots.clear)
            self.csv_button.clicked.connect(lambda: self._export("CSV files (*.csv)", ".csv", self.plots.export_csv))
            self.png_button.clicked.connect(lambda: self._export("PNG images (*.png)", ".png", self.plots.export_png))
            self.plots.set_served(self.served)
        return self.plots

    # actions
    def start(self) -> None:
        if self.controller.busy:
            return
        self.ensure_plots().clear()
        self.log.clear()
        self.crash_findings = []
        self.highlight_requested.emit(None)
        self._set_reason("")
        kind = self.engine_key()
        try:
            if kind == "attach":
                url = self.url_field.text().strip()
                self.controller.attach(url, self.key_field.key())
                self.key_field.keep_for(url)
            else:
                launch = self.next_launch()
                if launch.engine == "embedded" and self.weights.currentText() == "dummy":
                    too_big = self.dummy_does_not_fit()
                    if too_big:
                        raise RuntimeError(too_big)
                    launch = launch.with_(extra=launch.extra + ("--load-format", "dummy"))
                if launch.engine == "sglang" and self.dump_option.chosen_folder():
                    launch = launch.with_(tensor_dump=self.dump_option.chosen_folder())
                self.controller.start(launch, port=self.port.value() or None)
                if launch.tensor_dump:
                    self.tensor_dump_started.emit(launch.tensor_dump)
        except (OSError, RuntimeError) as err:
            self.stage.setText("<span style='color:#C62828'>Could not start</span>")
            self._set_reason(str(err))
            return
        if self.controller.base_url and kind != "attach":
            self.url_field.setText(self.controller.base_url)

    def dummy_does_not_fit(self) -> str:
        """Dummy weights are made at full size before the engine plans its pools: a model larger than
        this machine's free memory would be killed for it. The plan says so first ("" when it fits,
        or when the device's memory is not known here: an accelerator is sized by the engine)."""
        device = self.device.currentText()
        cpu_only = self.available_devices is not None and self.available_devices <= {"cpu", "auto"}
        source = self.model_field.text().strip()
        if self.layer_map is None or not (device == "cpu" or (device == "auto" and cpu_only)):
            return ""
        if source not in (self.layer_map.source, self.layer_map.name):
            return ""  # another model than the map's: its size is not known here
        import psutil

        from bringup.core.layermap.sizes import format_bytes
        from bringup.core.planner import plan_memory

        free = psutil.virtual_memory().available
        plan = plan_memory(self.layer_map, device_memory=free, device="cpu", dtype="bfloat16")
        if plan.ok:
            return ""
        return (f"{self.layer_map.name} with dummy weights needs {format_bytes(plan.weights_bytes)} for its weights alone; "
                f"this machine has {format_bytes(free)} of memory free. Run 'default' (the miniature with "
                "Nemotron-3-Nano's pattern), or plan this model on a device it fits in the Plan tab.")

    def stop(self) -> None:
        self.load.stop()
        self.controller.stop()

    def shutdown(self) -> None:
        """Window closing: stop load and the engine tree, and wait for it."""
        self.load.stop()
        self.controller.stop_blocking()

    # what the window remembers (QSettings; never the API key)
    def save_state(self, settings) -> None:
        settings.setValue("run/splitter", self.split.saveState())
        settings.setValue("run/url", self.url_field.text().strip())
        settings.setValue("run/side_tab", self.side.currentIndex())

    def restore_state(self, settings) -> None:
        split = settings.value("run/splitter")
        if split is not None:
            self.split.restoreState(split)
        url = settings.value("run/url")
        if url and not self.controller.busy:
            self.url_field.setText(str(url))
            self._recall_key()
        side = settings.value("run/side_tab")
        if side is not None and str(side).isdigit():
            self.side.setCurrentIndex(int(side))

    def open_demo(self) -> None:
        from bringup.app.demo import DemoWindow

        attach = self.controller.base_url if self.controller.state in ("ready", "attached") else None
        if attach and self.served is not None:  # the demo of what runs: its name, map, device and prompts
            from bringup.app.demo import profile_for

            self._demo = DemoWindow(profile_for(self.served), attach_url=attach, api_key=self.controller.api_key)
        else:
            self._demo = DemoWindow(attach_url=attach, api_key=self.controller.api_key if attach else None)
        self._demo.showFullScreen()

    # controller events
    def _on_stage(self, stage: str, progress: float) -> None:
        self.progress.setValue(int(progress * 100))
        self.stage.setText(f"<b>{stage.capitalize()}</b> · {self.controller.base_url or ''}")

    def _on_figures(self, f: dict) -> None:
        parts = []
        if "kv_tokens" in f:
            parts.append(f"KV pool {f['kv_tokens']:,} tokens")
        if "state_slots" in f:
            parts.append(f"state pool {f['state_slots']:,} slots")
        if "weights_gb" in f:
            parts.append(f"weights {f['weights_gb']:.2f} GB")
        if "max_running_requests" in f:
            parts.append(f"max running {f['max_running_requests']}")
        self.figures.setText(" · ".join(parts))

    def _on_ready(self, url: str) -> None:
        self.progress.setValue(100)
        pid = self.controller.process.pid if self.controller.process else None
        who = f"pid {pid}" if pid else "attached"
        self.stage.setText(f"<b style='color:#2E7D32'>Ready</b> · {url} · {who}")
        self.chat.set_server(url, self.controller.api_key)
        self.load.set_server(url, self.controller.api_key)

    def _on_info(self, info: dict) -> None:
        from bringup.app.run.engine_controller import device_text

        from bringup.core.client.running_label import running_label

        label = running_label(info) or device_text(info)  # what really runs: architecture, weights, device
        if label and label not in self.stage.text():
            self.stage.setText(self.stage.text() + f" · {label}")
        self._set_served(ServedModel.from_info(info, self.controller.base_url or ""))

    def _set_served(self, served) -> None:
        """The model that runs now (None: none): the chat, graphs and window follow it."""
        self.served = served
        if served is not None:
            self.last_served = served
        self.chat.set_model(served)
        if self.plots is not None and hasattr(self.plots, "set_served"):
            self.plots.set_served(served)
        self.running_changed.emit(served)

    def _on_crash(self, code: int, tail: list[str]) -> None:
        self.load.set_server(None)
        self.chat.set_server(None)
        self._set_served(None)
        from bringup.core.exit_status import exit_text, likely_cause

        # Killed by a signal, the last log line is whatever came before ("ready to roll!"): say why instead.
        why = likely_cause(code) if code < 0 else (tail[-1] if tail else "")
        self.stage.setText(f"<b style='color:#C62828'>Engine {exit_text(code)}</b> · {escape(why)}")
        self._set_reason(why)  # whole, wrapped: a refusal explains itself in more than a line
        self.progress.setValue(0)
        text = self.log.text()
        self.crash_log.emit(text)
        self.diagnose_text(text)
        from bringup.core.exit_status import exit_finding

        self.crash_findings.insert(0, exit_finding(code))

    def _on_attach_failed(self, why: str) -> None:
        self.progress.setValue(0)
        self.stage.setText(f"<b style='color:#C62828'>Not attached</b> · {escape(self.controller.base_url or '')}")
        self._set_reason(why)

    def _on_lost(self, why: str) -> None:
        self.stage.setText(f"<b style='color:#C62828'>Lost</b> · {escape(self.controller.base_url or '')} · {escape(why)}")
        self._set_reason(f"The engine stopped answering: {why}. The graphs show a gap until it answers again; "
                         "Stop ends the session.")

    def _on_regained(self) -> None:
        self._set_reason("")
        self._on_ready(self.controller.base_url or "")

    def _set_reason(self, text: str) -> None:
        self.reason.setText(text)
        self.reason.setToolTip(text if len(text) > 200 else "")
        self.reason.setVisible(bool(text))

    def _recall_key(self) -> None:
        self.key_field.recall_for(self.url_field.text().strip())

    def _on_stopped(self) -> None:
        self.stage.setText("Engine stopped.")
        self.progress.setValue(0)
        self.chat.set_server(None)
        self.load.set_server(None)
        self._set_served(None)
        self.model_field.setText(serve_source_for(self.layer_map))  # the next Start serves the header's model

    def diagnose_text(self, text: str) -> list:
        """Findings from the log; the first one naming layers goes on the map at once."""
        from bringup.core.diagnosis import diagnose_log

        findings = diagnose_log(text, layer_map=self.layer_map)
        self.crash_findings = [f.to_json() for f in findings]
        marks = next((m for m in map(Highlight.of, findings) if m is not None), None)
        if marks is not None:
            self.highlight_requested.emit(marks)
        if findings:
            self.stage.setText(self.stage.text() + f" · diagnosis: <b>{escape(findings[0].title)}</b>")
        return findings

    def explain_line(self, line: int) -> None:
        """A log line was clicked: the finding it belongs to (the one seen on that line, or the
        traceback it heads) is shown under the log and its layers go on the map."""
        from bringup.core.diagnosis import diagnose_log

        findings = diagnose_log(self.log.text(), layer_map=self.layer_map)
        target = _traceback_end(self.log.lines, line)
        finding = next((f for f in findings if target in f.lines), None)
        if finding is None:
            self.log.show_explanation("")
            return
        self.log.show_explanation(f"<b>{escape(finding.title)}</b> (line {finding.lines[0]}): "
                                  f"{escape(finding.explanation)}<br><b>Fix:</b> {escape(finding.fix)}",
                                  finding.severity)
        marks = Highlight.of(finding)
        if marks is not None:
            self.highlight_requested.emit(marks)

    def _engine_changed(self) -> None:
        attach = self.engine_key() == "attach"
        for w in self._attach_fields:
            w.setVisible(attach)
        for w in self._launch_fields:
            w.setVisible(not attach)
        self.dump_option.setVisible(self.engine_key() == "sglang")

    def _sync_buttons(self, *_args) -> None:
        busy = self.controller.busy
        self.start_button.setEnabled(not busy)
        self.stop_button.setEnabled(busy and self.controller.state != "stopping")
        self.engine.setEnabled(not busy)

    # export
    def _export(self, filter_: str, suffix: str, write) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export", f"bringup-metrics{suffix}", filter_)
        if path:
            try:
                write(path)
            except OSError as err:
                QMessageBox.warning(self, "Export failed", f"Could not write {path}: {err}")

    def _ask_report_path(self) -> None:
        from bringup.app.run.report import report_name, reports_folder

        folder = reports_folder()
        folder.mkdir(parents=True, exist_ok=True)
        path, _ = QFileDialog.getSaveFileName(self, "Export session report", str(folder / report_name(self)),
                                              "HTML (*.html)")
        if not path:
            return
        try:
            written = self.export_report(path)
        except OSError as err:
            QMessageBox.warning(self, "Export failed", f"Could not write {path}: {err}")
            return
        self.confirm_report(written)

    def confirm_report(self, path: Path) -> QMessageBox:
        """Say where the report went, with Open (the browser) and Show folder."""
        from PySide6.QtCore import QUrl
        from PySide6.QtGui import QDesktopServices

        box = QMessageBox(QMessageBox.Icon.Information, "Report saved", f"The session report was saved to\n{path}",
                          parent=self)
        open_button = box.addButton("Open", QMessageBox.ButtonRole.AcceptRole)
        folder_button = box.addButton("Show folder", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Close)
        box.buttonClicked.connect(lambda button: QDesktopServices.openUrl(QUrl.fromLocalFile(
            str(path if button is open_button else Path(path).parent))) if button in (open_button, folder_button) else None)
        self._report_box = box
        box.open()
        return box

    def export_report(self, path: str | Path) -> Path:
        from bringup.app.run.report import collect_session

        return collect_session(self).write(path)
