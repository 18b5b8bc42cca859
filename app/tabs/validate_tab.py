"""The Validate tab: what this machine has, and whether a launch configuration would work on it.

Three columns: the launch settings form; a verdict banner over the findings (click one and the
layer map shows its layers); and the compatibility matrix (device x strategy x attention backend),
the resolved settings and the device probe. Under them, the exact launch command with Copy.
Validation is pure Python (`bringup.core.rules`), re-run behind a debounce timer on every change;
the probe imports torch, so it runs in child processes (`bringup.core.probe.runner`) driven from a
thread (`ProbeRunner`), and a crashed or hung probe step is shown as such while the window lives on.
"""

from __future__ import annotations

import html
import json
import sys
import traceback

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from bringup.app.layermap.highlight import Highlight

from . import validate_logic as logic
from bringup.app.launch_state import LaunchState

from .findings_widgets import FindingsList, as_dict, layer_rows, severity_style
from .launch_binding import FormBinding, combo_text, spin_value
from .matrix_widgets import CompatMatrixView
from .probe_runner import ProbeRunner
from .validate_widgets import LaunchCommand, ProbeChecklist, ResolvedTable


def _show_memory(combo: QComboBox, value) -> None:
    """One device's memory in bytes: its preset, or a "Custom" entry (Plan's own size)."""
    index = combo.findData(value)
    if index < 0:
        from bringup.core.layermap.sizes import format_bytes

        combo.addItem(f"Custom \u00b7 {format_bytes(value, short=True)}", value)
        index = combo.count() - 1
    combo.setCurrentIndex(index)


class ValidateTab(QWidget):
    title = "Validate"
    highlight_requested = Signal(object)
    probe_finished = Signal(object)  # the probe report, for tests and for other tabs
    PROBE_OPTIONS: dict = {}  # defaults for new tabs (tests narrow the steps to skip the torch import)

    def __init__(self, parent=None, *, probe_on_show: bool = True) -> None:
        super().__init__(parent)
        self.layer_map = None
        self.result = None  # the last ValidationResult (None: nothing validated, or it failed)
        self.matrix = None  # the last compatibility matrix (dict)
        self.probe_report = None
        self.probe_on_show = probe_on_show
        self.probe_options: dict = dict(self.PROBE_OPTIONS)  # run_probe keywords: timeout, steps, simulate
        self.probe_runner = ProbeRunner(self)
        self.probe_runner.step.connect(self._probe_step)
        self.probe_runner.finished.connect(self._probe_done)
        self.probe_runner.failed.connect(self._probe_errored)
        self._device_touched = False
        self._matrix_key = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(250)  # typing a target version must not flash errors per keystroke
        self._timer.timeout.connect(self.validate)
        self._build()

    # --- layout -------------------------------------------------------------------------------
    def _build(self) -> None:
        choices = logic.choices()
        self.target = QComboBox()
        self.target.addItems(choices["targets"])
        self.target.setEditable(True)
        self.target.setToolTip("embedded (our engine), sglang==X.Y.Z or vllm==X.Y.Z; a version between rule "
                               "profiles uses the nearest earlier one")
        self.device = QComboBox()
        self.device.addItems(choices["devices"])
        self.gpu = QComboBox()
        self.gpu.addItems(["auto", *choices["gpu_generations"]])
        self.gpu.setToolTip("CUDA GPU generation: decides SGLang's default attention backend")
        self.backend = QComboBox()
        self.backend.addItems(["auto", *choices["attention_backends"]])
        self.backend.setEditable(True)
        self.strategy = QComboBox()
        self.strategy.addItems(choices["strategies"])
        self.disable_radix = QCheckBox("Disable radix cache")
        self.disable_overlap = QCheckBox("Disable overlap schedule")
        self.page_size = QSpinBox()
        self.page_size.setRange(0, 1024)
        self.page_size.setSpecialValueText("auto")
        self.tp = QSpinBox()
        self.tp.setRange(1, 64)
        self.pp = QSpinBox()
        self.pp.setRange(1, 64)
        self.dtype = QComboBox()
        self.dtype.addItems(choices["dtypes"])
        self.kv_dtype = QComboBox()
        self.kv_dtype.addItems(choices["kv_dtypes"])
        self.ssm_dtype = QComboBox()
        self.ssm_dtype.addItems(["auto", *choices["ssm_dtypes"]])
        self.ssm_dtype.setToolTip("auto: the config's mamba_ssm_dtype, else float32")
        self.memory = QComboBox()  # a real device's memory: Validate then includes the memory plan
        self.memory.addItem("No memory plan", None)
        for label, size, source in choices["memory_presets"]:
            self.memory.addItem(label, size)
            self.memory.setItemData(self.memory.count() - 1, source, Qt.ItemDataRole.ToolTipRole)

        for combo in (self.target, self.device, self.gpu, self.backend, self.strategy, self.dtype, self.kv_dtype,
                      self.ssm_dtype, self.memory):  # long preset names must not take the findings' room
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(14)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Target engine", self.target)
        form.addRow("Device", self.device)
        form.addRow("CUDA GPU", self.gpu)
        form.addRow("Attention backend", self.backend)
        form.addRow("Mamba strategy", self.strategy)
        form.addRow("", self.disable_radix)
        form.addRow("", self.disable_overlap)
        form.addRow("Page size", self.page_size)
        parallel = QHBoxLayout()
        parallel.addWidget(QLabel("TP"))
        parallel.addWidget(self.tp, 1)
        parallel.addWidget(QLabel("PP"))
        parallel.addWidget(self.pp, 1)
        form.addRow("Parallelism", parallel)
        form.addRow("Model dtype", self.dtype)
        form.addRow("KV cache dtype", self.kv_dtype)
        form.addRow("SSM state dtype", self.ssm_dtype)
        form.addRow("Device memory", self.memory)
        settings_box = QGroupBox("Launch settings")
        settings_box.setLayout(form)

        self.probe = ProbeChecklist()
        self.probe.reprobe_requested.connect(self.start_probe)

        self.banner = QLabel("")
        self.banner.setWordWrap(True)
        self.banner.setTextFormat(Qt.TextFormat.RichText)
        self.banner.setMargin(8)
        self.findings = FindingsList("No findings: this launch should work.")
        self.findings.details_for = lambda finding: layer_rows(finding, self.layer_map)
        self.findings.finding_selected.connect(self._finding_selected)
        findings_column = QWidget()
        findings_layout = QVBoxLayout(findings_column)
        findings_layout.setContentsMargins(0, 0, 0, 0)
        findings_layout.addWidget(self.banner)
        findings_layout.addWidget(self.findings, 1)

        self.resolved = ResolvedTable()
        self.grid = CompatMatrixView()
        self.grid.cell_chosen.connect(self.apply_cell)
        self.grid_caption = QLabel("")
        self.grid_caption.setWordWrap(True)
        self.grid_caption.setStyleSheet("color: #6b7280;")
        grid_page = QWidget()
        grid_layout = QVBoxLayout(grid_page)
        grid_layout.setContentsMargins(6, 6, 6, 6)
        grid_layout.addWidget(self.grid_caption)
        grid_layout.addWidget(self.grid)
        grid_layout.addStretch(1)
        grid_scroll = QScrollArea()
        grid_scroll.setWidgetResizable(True)
        grid_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        grid_scroll.setWidget(grid_page)
        self.side = QTabWidget()
        self.side.addTab(grid_scroll, "Compatibility matrix")
        self.side.addTab(self.resolved, "Resolved settings")
        self.side.addTab(self.probe, "This machine")

        columns = QSplitter(Qt.Orientation.Horizontal)
        columns.addWidget(self._scrolled(settings_box))
        columns.addWidget(findings_column)
        columns.addWidget(self.side)
        columns.setStretchFactor(0, 0)
        columns.setStretchFactor(1, 3)
        columns.setStretchFactor(2, 3)
        columns.setSizes([320, 560, 560])
        self.command = LaunchCommand()
        command_row = QHBoxLayout()
        command_label = QLabel("Launch command")
        command_label.setStyleSheet("font-weight: 600;")
        command_row.addWidget(command_label, 0, Qt.AlignmentFlag.AlignTop)
        command_row.addWidget(self.command, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(columns, 1)
        layout.addLayout(command_row)

        self.state = LaunchState()  # this tab's own until the window hands it the shared one
        self.binding = FormBinding(self.state, self._shown)
        for key, widget, read_show in (
                ("target", self.target, None), ("device", self.device, None),
                ("gpu", self.gpu, combo_text(none_is_auto=True)),
                ("attention_backend", self.backend, combo_text(none_is_auto=True)),
                ("mamba_strategy", self.strategy, None), ("dtype", self.dtype, None),
                ("kv_dtype", self.kv_dtype, None), ("mamba_ssm_dtype", self.ssm_dtype, combo_text(none_is_auto=True)),
                ("page_size", self.page_size, spin_value(zero_is_none=True)), ("tp", self.tp, None),
                ("pp", self.pp, None), ("disable_radix_cache", self.disable_radix, None),
                ("disable_overlap_schedule", self.disable_overlap, None),
                ("device_memory", self.memory, (lambda combo: combo.currentData(), _show_memory))):
            self.binding.bind(key, widget, read_show)
        self.device.currentTextChanged.connect(self._device_chosen)
        self.target.currentTextChanged.connect(self._target_chosen)
        self.binding._show(self.state.values())
        self.device.activated.connect(lambda _i: setattr(self, "_device_touched", True))
        self._clear("Load a model to validate a launch.", "info")

    # --- the tab contract ---------------------------------------------------------------------
    def set_layer_map(self, layer_map) -> None:
        self.layer_map = layer_map
        self._matrix_key = None
        self.validate()

    # --- settings -----------------------------------------------------------------------------
    def set_launch_state(self, state: LaunchState) -> None:
        """Show and edit the window's shared launch settings (Plan and Run read the same)."""
        self.binding.set_state(state)
        self.state = state
        self.validate()

    def settings(self) -> dict:
        """The launch settings as Validate checks them: `target` plus LaunchSettings' fields and
        `device_memory`, from the shared state; SGLang-only fields read as their defaults for the
        embedded engine (the form greys them out) and `xmx` comes from the probe."""
        values = self.state.values()
        device = values["device"]
        if self._embedded():
            values.update(gpu=None, attention_backend=None, mamba_strategy="auto", disable_radix_cache=False,
                          disable_overlap_schedule=False, xmx=None)
            return values
        values["gpu"] = values["gpu"] if device == "cuda" else None
        # From the probe: does this machine's XPU have XMX (intel_xpu falls back to triton without)?
        values["xmx"] = logic.xmx_of(self.probe_report) if device == "xpu" else None
        return values

    def set_settings(self, **values) -> None:
        """Set launch settings by settings() key (the state's keys); one validation follows."""
        values.pop("xmx", None)  # comes from the probe, not the form
        self.state.update(**values)
        self.schedule()

    def _shown(self, changes: dict) -> None:
        """The state changed (here or in another tab): adjust the form and validate again."""
        if "device" in changes:
            self._device_chosen(self.device.currentText())
        if "target" in changes or "device" in changes:
            self._target_chosen()
        self.schedule()

    def _embedded(self) -> bool:
        return self.target.currentText().strip().lower() in ("embedded", "bringup")

    def _target_chosen(self, _text: str = "") -> None:
        """Grey out what only SGLang has (backends, radix cache strategies) for the embedded engine."""
        embedded = self._embedded()
        for widget in (self.backend, self.strategy, self.disable_radix, self.disable_overlap):
            widget.setEnabled(not embedded)
            widget.setToolTip("SGLang only: the embedded engine picks its kernels per device and has no prefix cache"
                              if embedded else "")
        if self.target.currentText().strip().lower().startswith("vllm"):  # its Mamba cache mode follows prefix caching
            for widget in (self.strategy, self.disable_overlap):
                widget.setEnabled(False)
                widget.setToolTip("SGLang only: vLLM's mamba_cache_mode is align with prefix caching, none without")
        self.gpu.setEnabled(not embedded and self.device.currentText() == "cuda")

    def _device_chosen(self, device: str) -> None:
        """Offer the attention backends known for this device first; keep a backend the user typed."""
        self.gpu.setEnabled(device == "cuda" and not self._embedded())
        current = self.backend.currentText()
        ours = logic.backends_for(device)
        self.backend.blockSignals(True)
        self.backend.clear()
        self.backend.addItems(["auto", *ours])
        others = [b for b in logic.choices()["attention_backends"] if b not in ours]
        if others:
            self.backend.insertSeparator(self.backend.count())
            self.backend.addItems(others)
        self.backend.setCurrentText(current if current else "auto")
        self.backend.blockSignals(False)

    def apply_cell(self, cell: dict) -> None:
        """A compatibility-grid click: try that device / strategy / backend in the form."""
        self.set_settings(**logic.cell_settings(cell))

    def schedule(self, *_args) -> None:
        self._timer.start()

    # --- validation ---------------------------------------------------------------------------
    def validate(self) -> None:
        """Validate the form's settings now (settings changes call this through the debounce)."""
        self._timer.stop()
        if self.layer_map is None:
            self._clear("Load a model to validate a launch.", "info")
            return
        settings = self.settings()
        devices = self.probe_report.available_devices() if self.probe_report is not None else None
        try:
            result = logic.validate(self.layer_map, settings, devices)
        except logic.UserError as exc:
            self._clear(str(exc), "error")
            return
        except Exception as exc:  # a bug in the rules must not take the tab down
            traceback.print_exc(file=sys.stderr)
            self._clear(f"The rules failed on these settings: {type(exc).__name__}: {exc}. This is a bug in the "
                        "workbench; please report it with these settings and the model's config.json", "error")
            return
        self.result = result
        findings = [*result.findings, *self._probe_findings()]
        self.findings.set_empty_text("No findings: this launch should work.", ok=True)
        self.findings.set_findings(findings)
        self.resolved.set_resolved(result.resolved, settings)
        self.command.set_command(result.command)
        self._show_verdict(findings, settings)
        self._refresh_matrix(settings)
        self.state.set_result(result)

    def report_section(self) -> dict:
        """For the session report: this launch's findings."""
        section = {}
        if self.result is not None:
            section["findings"] = [as_dict(f) for f in [*self.result.findings, *self._probe_findings()]]
        return section

    def _probe_findings(self) -> list:
        """A probe step that crashed, hung or failed concerns any launch on this machine."""
        if self.probe_report is None:
            return []
        return [f for f in self.probe_report.findings if f.severity in ("error", "warning")]

    def _clear(self, text: str, severity: str) -> None:
        self.result = None
        self.state.set_result(None)
        self.matrix = None
        self._matrix_key = None
        self.findings.set_findings([])
        self.findings.set_empty_text(text, ok=False)
        self.command.set_command("")
        self.resolved.set_resolved(None)
        self.grid.set_matrix(None)
        self.grid_caption.setText("")
        self._show_banner(html.escape(text), severity)
        self.highlight_requested.emit(None)

    def _refresh_matrix(self, settings: dict) -> None:
        """The matrix depends on the model and the settings that are not its axes; cache it."""
        key = logic.matrix_key(settings)
        if key != self._matrix_key:
            self.matrix = logic.matrix(self.layer_map, settings)
            self._matrix_key = key
            self.grid_caption.setText(logic.matrix_caption(self.matrix))
        self.grid.set_matrix(self.matrix, logic.current_cell(settings))

    @staticmethod
    def _scrolled(widget: QWidget) -> QScrollArea:
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(widget)
        scroll.setMinimumWidth(widget.minimumSizeHint().width() + scroll.verticalScrollBar().sizeHint().width())
        return scroll

    def _show_verdict(self, findings: list, settings: dict) -> None:
        errors = sum(1 for f in findings if severity_style(f.severity)[2] == 0)
        warnings = sum(1 for f in findings if severity_style(f.severity)[2] == 1)
        target = settings["target"]
        where = html.escape(f"{target} on {settings['device']}")
        if errors:
            text = (f"<b>This launch would fail</b> ({where}): {errors} error{'s' if errors > 1 else ''}"
                    + (f", {warnings} warning{'s' if warnings > 1 else ''}" if warnings else "")
                    + "." + (" Click a finding to see the layers it names." if any(f.layers for f in findings) else ""))
            self._show_banner(text, "error")
        elif warnings:
            self._show_banner(f"<b>This launch should start</b> ({where}), with {warnings} "
                              f"warning{'s' if warnings > 1 else ''}.", "warning")
        else:
            self._show_banner(f"<b>This launch should work</b> ({where}).", "ok")

    def _show_banner(self, rich_text: str, severity: str) -> None:
        colour = QColor(severity_style(severity)[0])
        tint = f"rgba({colour.red()}, {colour.green()}, {colour.blue()}, 28)"
        self.banner.setText(rich_text)
        self.banner.setStyleSheet(
            f"QLabel {{ border-left: 5px solid {colour.name()}; background: {tint}; border-radius: 4px; }}"
        )

    def _finding_selected(self, finding) -> None:
        self.highlight_requested.emit(Highlight.of(finding))

    # --- the device probe ---------------------------------------------------------------------
    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.probe_on_show and self.probe_report is None and not self.probe_runner.running:
            self.start_probe()

    def start_probe(self) -> None:
        """Probe the devices (child processes, driven from a thread); the window stays live and
        the steps stream into the checklist as they finish."""
        if self.probe_runner.start(**self.probe_options):
            self.probe.set_running()

    def _probe_step(self, step) -> None:
        self.probe.add_step(logic.LAYER_TITLES.get(step.layer, step.layer), step.name, step.verdict, step.detail,
                            step.title)

    def _probe_done(self, report) -> None:
        self.probe_report = report
        rows, status, ok = logic.probe_rows(report)
        self.probe.set_steps(rows, status, ok)
        self.probe.set_report_json(json.dumps(report.to_json(), indent=2, default=str))
        if not self._device_touched:
            device = logic.preferred_device(report)
            if device and self.device.findText(device) >= 0 and device != self.device.currentText():
                self.device.setCurrentText(device)
                self._device_touched = False  # chosen by the probe, not by the user
        self.validate()
        self.probe_finished.emit(report)

    def _probe_errored(self, text: str) -> None:
        # The probe's parent side failed (not a step in the child): say so; the window lives on.
        self.probe_report = None
        self.probe.set_steps([("Probe", "probe", "failed", text)],
                             "The device probe could not run. The rest of the workbench still works.", ok=False)
        self.probe_finished.emit(None)
