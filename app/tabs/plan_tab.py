"""The Plan tab: where the device memory goes and how many requests fit, with what-if controls.

Every control re-plans through `bringup.core.planner.plan_memory`, the same function the embedded
engine sizes its pools with, so the bar is what the engine will allocate. Planning is arithmetic
(microseconds), so it runs on the GUI thread behind a short throttle timer.
"""

from __future__ import annotations

import html
import os
import sys
import traceback

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
                               QCheckBox,
                               QComboBox,
                               QDoubleSpinBox,
                               QFormLayout,
                               QGridLayout,
                               QGroupBox,
                               QHBoxLayout,
                               QLabel,
                               QScrollArea,
                               QSpinBox,
                               QVBoxLayout,
                               QWidget,
                               )

from bringup.core.planner.device_presets import PRESETS as _PRESETS
from bringup.core.layermap.sizes import format_bytes

from bringup.app.launch_state import LaunchState

from .background import Background
from .launch_binding import FormBinding, combo_text
from .plan_text import (
                        assumed_text,
                        bottleneck_name,
                        bottleneck_note,
                        busiest_stage,
                        comparison_html,
                        plan_segments,
                        running_note,
                        )
from .plan_widgets import GIB, FigureCard, MemoryBar, StageTable, fmt_count

# Device memory presets: one entry per real device (a Max 1550 is two 64 GB devices in FLAT mode),
# from core/planner/device_presets.py, each with its source as the tooltip; "Custom" keeps the spin box value.
DEVICE_PRESETS = [(p.label, p.memory_gib, p.device, p.source) for p in _PRESETS]
MEASURE = "measure"  # the preset that asks the device probe
MEASURE_TEXT = "This machine (ask the device probe)"


PLAN_DTYPE = "bfloat16"  # weights and KV as the engines load them by default


def _read_checkpoint(layer_map):
    """(the local checkpoint's sizes from its safetensors headers, or None; a problem reading them)."""
    source = getattr(layer_map, "source", "") or ""
    if not source or not os.path.exists(source):
        return None, ""
    from bringup.core.errors import UserError
    from bringup.core.planner.weights import checkpoint_weights

    try:
        return checkpoint_weights(source), ""
    except UserError as exc:
        return None, str(exc)


class PlanTab(QWidget):
    title = "Plan"
    highlight_requested = Signal(object)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.layer_map = None
        self.plan = None  # the last MemoryPlan
        self.advice = None  # FitAdvice when the weights do not fit one device
        self._checkpoint = None  # CheckpointWeights of a local model folder
        self._checkpoint_problem = ""
        self.error = ""
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(30)
        self._timer.timeout.connect(self.replan)
        self._measure_token = 0
        self._background = Background(self)
        self._background.done.connect(self._measured)
        self._background.failed.connect(self._measure_failed)
        self._build()

    # --- layout -------------------------------------------------------------------------------
    def _build(self) -> None:
        self.preset = QComboBox()
        self.preset.addItem(MEASURE_TEXT, MEASURE)
        for name, gib, device, source in DEVICE_PRESETS:
            self.preset.addItem(name, (gib, device))
            self.preset.setItemData(self.preset.count() - 1, source, Qt.ItemDataRole.ToolTipRole)
        self.preset.addItem("Custom", None)
        self.preset.setToolTip("a device to plan for, or this machine's own (measured by the device probe)")
        self.memory = QDoubleSpinBox()
        self.memory.setRange(1, 4096)
        self.memory.setDecimals(1)
        self.memory.setSuffix(" GiB")
        from bringup.core.rules import settings as rule_settings

        self.device = QComboBox()
        self.device.addItems(rule_settings.DEVICES)
        from bringup.core.rules.targets import known_targets, vllm_targets

        targets = known_targets()  # embedded, then SGLang's rule profiles oldest first
        self.target = QComboBox()
        self.target.addItems([t for t in targets if t == "embedded"] + [t for t in reversed(targets) if t != "embedded"]
                             + vllm_targets())
        self.auto_fraction = QCheckBox("auto")
        self.auto_fraction.setChecked(True)
        self.fraction = QDoubleSpinBox()
        self.fraction.setRange(0.05, 0.99)
        self.fraction.setDecimals(3)
        self.fraction.setSingleStep(0.01)
        self.fraction.setValue(0.88)
        self.fraction.setEnabled(False)
        self.tp = QSpinBox()
        self.tp.setRange(1, 64)
        self.pp = QSpinBox()
        self.pp.setRange(1, 64)
        self.kv_dtype = QComboBox()
        self.kv_dtype.addItems(rule_settings.KV_DTYPES)
        self.ssm_dtype = QComboBox()
        self.ssm_dtype.addItems(["auto", *rule_settings.SSM_DTYPES])
        self.ssm_dtype.setToolTip("auto: as the target resolves it (the config's mamba_ssm_dtype, else float32)")
        self.strategy = QComboBox()
        self.strategy.addItems(rule_settings.MAMBA_STRATEGIES)
        self.strategy.setToolTip("SGLang's mamba radix cache strategy: state slots each running request holds")
        self.disable_radix = QCheckBox("Disable radix cache")
        # SGLang picks these by device memory and release; 0 keeps the release's default.
        self.chunked_prefill = QSpinBox()
        self.chunked_prefill.setRange(0, 1_048_576)
        self.chunked_prefill.setSingleStep(1024)
        self.chunked_prefill.setSpecialValueText("release default")
        self.chunked_prefill.setToolTip("--chunked-prefill-size: enters SGLang's auto mem fraction")
        self.graph_max_bs = QSpinBox()
        self.graph_max_bs.setRange(0, 4096)
        self.graph_max_bs.setSpecialValueText("release default")
        self.graph_max_bs.setToolTip("--cuda-graph-max-bs: SGLang reserves 2 MB per decode graph batch size")
        self.context = QSpinBox()
        self.context.setRange(0, 10_000_000)
        self.context.setSingleStep(1024)
        self.context.setSpecialValueText("model's own")
        self.context.setSuffix(" tokens")

        fraction_row = QHBoxLayout()
        fraction_row.addWidget(self.fraction, 1)
        fraction_row.addWidget(self.auto_fraction)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Device", self.preset)
        form.addRow("Device memory", self.memory)
        form.addRow("Device kind", self.device)
        form.addRow("Target", self.target)
        form.addRow("Mem fraction", fraction_row)
        form.addRow("Tensor parallel", self.tp)
        form.addRow("Pipeline parallel", self.pp)
        form.addRow("KV cache dtype", self.kv_dtype)
        form.addRow("SSM state dtype", self.ssm_dtype)
        form.addRow("Mamba strategy", self.strategy)
        form.addRow("", self.disable_radix)
        form.addRow("Chunked prefill", self.chunked_prefill)
        form.addRow("Graph max batch", self.graph_max_bs)
        form.addRow("Context length", self.context)
        controls = QGroupBox("What if\u2026")
        controls.setLayout(form)
        controls.setMaximumWidth(330)

        self.bar = MemoryBar()
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.TextFormat.RichText)
        self.assumed = QLabel("")  # the target's defaults the plan took (SGLang: by device memory and release)
        self.assumed.setWordWrap(True)
        self.assumed.setStyleSheet("color: #6b7280")
        self.cards = {
            "kv_tokens": FigureCard("KV cache tokens"),
            "state_slots": FigureCard("State slots"),
            "max_running_requests": FigureCard("Max running requests"),
            "bottleneck": FigureCard("Bottleneck"),
        }
        cards = QGridLayout()
        for i, card in enumerate(self.cards.values()):
            cards.addWidget(card, 0, i)
        # The comparison: figures on the left, what they mean on the right.
        self.compare = QLabel("")
        self.compare.setTextFormat(Qt.TextFormat.RichText)
        self.compare_text = QLabel("")
        self.compare_text.setWordWrap(True)
        self.compare_text.setTextFormat(Qt.TextFormat.RichText)
        self.compare_text.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        compare_box = QGroupBox("Why a hybrid matters")
        lower = QHBoxLayout(compare_box)
        lower.addWidget(self.compare, 0, Qt.AlignmentFlag.AlignTop)
        lower.addSpacing(16)
        lower.addWidget(self.compare_text, 1)

        right = QVBoxLayout()
        right.addWidget(self.bar)
        right.addWidget(self.message)
        right.addWidget(self.assumed)
        right.addLayout(cards)
        right.addWidget(compare_box)
        self.stage_table = StageTable()
        self.stage_table.itemSelectionChanged.connect(self._stage_selected)
        self.stage_box = QGroupBox("Pipeline stages (click one to see its layers on the map)")
        QVBoxLayout(self.stage_box).addWidget(self.stage_table)
        self.stage_box.setVisible(False)
        right.addWidget(self.stage_box)
        right.addStretch(1)
        right_widget = QWidget()
        right_widget.setLayout(right)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(right_widget)
        # The form scrolls on a short window rather than taking the layer map's room.
        controls_scroll = QScrollArea()
        controls_scroll.setWidgetResizable(True)
        controls_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        controls_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        controls_scroll.setWidget(controls)
        controls_scroll.setFixedWidth(controls.maximumWidth() + controls_scroll.verticalScrollBar().sizeHint().width() + 4)
        layout = QHBoxLayout(self)
        layout.addWidget(controls_scroll, 0)
        layout.addWidget(scroll, 1)

        self.target.currentTextChanged.connect(self._target_chosen)
        self.preset.currentIndexChanged.connect(self._preset_chosen)
        self.memory.valueChanged.connect(self._memory_edited)
        self.auto_fraction.toggled.connect(lambda auto: self.fraction.setEnabled(not auto))
        for signal in (self.device.currentIndexChanged, self.target.currentIndexChanged,
                       self.auto_fraction.toggled, self.fraction.valueChanged, self.tp.valueChanged,
                       self.pp.valueChanged, self.kv_dtype.currentIndexChanged,
                       self.ssm_dtype.currentIndexChanged, self.context.valueChanged,
                       self.strategy.currentIndexChanged, self.disable_radix.toggled,
                       self.chunked_prefill.valueChanged, self.graph_max_bs.valueChanged):
            signal.connect(self.schedule)
        h200 = next(i for i in range(self.preset.count()) if "H200" in self.preset.itemText(i))
        self.preset.setCurrentIndex(h200)
        self._preset_chosen(h200)
        self._target_chosen(self.target.currentText())
        # The settings Validate shares: this tab's own state until the window hands it the shared one,
        # seeded from the form (standalone, Plan opens on the embedded engine and an H200).
        self.state = LaunchState(target=self.target.currentText(), device=self.device.currentText(),
                                 mamba_ssm_dtype=None)
        self.binding = FormBinding(self.state, self._shown)
        for key, widget, read_show in (
                ("target", self.target, None), ("device", self.device, None), ("tp", self.tp, None),
                ("pp", self.pp, None), ("kv_dtype", self.kv_dtype, None),
                ("mamba_ssm_dtype", self.ssm_dtype, combo_text(none_is_auto=True)),
                ("mamba_strategy", self.strategy, None), ("disable_radix_cache", self.disable_radix, None)):
            self.binding.bind(key, widget, read_show)
        self.binding._show(self.state.values())

    def set_launch_state(self, state: LaunchState) -> None:
        """Plan what Validate checks: the window's shared launch settings."""
        self.binding.set_state(state)
        self.state = state

    def _shown(self, changes: dict) -> None:
        """Shared settings changed (here or in Validate): follow them and re-plan."""
        if "target" in changes:
            self._target_chosen(self.target.currentText())
        memory = changes.get("device_memory")
        if memory is not None and abs(memory - self.memory.value() * GIB) >= 1:  # not this tab's own edit
            self._show_memory(memory)
        elif "device" in changes:
            data = self.preset.currentData()
            if isinstance(data, tuple) and data[1] != self.device.currentText():
                self._select_preset_quietly(self.preset.count() - 1)  # "Custom": the preset named another device
        self.schedule()

    def _show_memory(self, memory: int) -> None:
        """The shared device memory: its preset (and that preset's device), else Custom with that size."""
        index = next((i for i, p in enumerate(_PRESETS) if p.memory_bytes == memory and p.device == self.device.currentText()),
                     next((i for i, p in enumerate(_PRESETS) if p.memory_bytes == memory), None))
        self.memory.blockSignals(True)
        self.memory.setValue(memory / GIB)
        self.memory.blockSignals(False)
        self._select_preset_quietly(self.preset.count() - 1 if index is None else index + 1)  # item 0 is "measure"

    def _select_preset_quietly(self, index: int) -> None:
        self.preset.blockSignals(True)
        self.preset.setCurrentIndex(index)
        self.preset.blockSignals(False)

    def _share_memory(self) -> None:
        """The user chose a device size here: Validate checks the launch against the same one."""
        if hasattr(self, "state"):
            self.state.update(device_memory=int(self.memory.value() * GIB))

    def _preset_chosen(self, index: int) -> None:
        data = self.preset.itemData(index)
        if data == MEASURE:
            self.measure_this_machine()
            return
        if data is None:
            return
        gib, device = data
        self.memory.blockSignals(True)
        self.memory.setValue(gib)
        self.memory.blockSignals(False)
        self.device.setCurrentText(device)
        preset = _PRESETS[index - 1]  # item 0 is "measure"
        if hasattr(self, "state"):
            self.state.update(device_memory=preset.memory_bytes)
        self.schedule()

    def measure_this_machine(self) -> None:
        """Ask the device probe (child processes, off the GUI thread) what this machine has."""
        from bringup.core.planner.device import detect_device_memory

        free = self.target.currentText() == "embedded"  # our engine sizes its pools from free memory
        self._measure_token += 1
        self.preset.setItemText(0, "This machine: measuring\u2026")
        self._show_message("Measuring this machine's device memory with the device probe\u2026", error=False)
        self._background.run(lambda: detect_device_memory("auto", free=free), token=self._measure_token)

    def _measured(self, token, found) -> None:
        if token != self._measure_token or self.preset.currentData() != MEASURE:
            return  # an older measurement, or the user chose another device meanwhile
        device, size, how = found
        self.preset.setItemText(0, f"This machine \u00b7 {device} \u00b7 {size / GIB:.1f} GiB")
        self.preset.setToolTip(how)
        self.memory.blockSignals(True)
        self.memory.setValue(size / GIB)
        self.memory.blockSignals(False)
        self.device.setCurrentText(device)
        self._share_memory()
        self.replan()

    def _measure_failed(self, token, text: str) -> None:
        if token != self._measure_token:
            return
        self.preset.setItemText(0, MEASURE_TEXT)
        self._show_message(f"Could not measure this machine: {text}", error=True)

    def _target_chosen(self, target: str) -> None:
        """The embedded engine runs on one device: TP and PP are SGLang's what-ifs."""
        single = target == "embedded"
        for spin in (self.tp, self.pp):
            if single:
                spin.setValue(1)
            spin.setEnabled(not single)
            spin.setToolTip("the embedded engine runs on one device" if single else "")
        for widget in (self.strategy, self.disable_radix, self.chunked_prefill, self.graph_max_bs):
            widget.setEnabled(not single)
            widget.setToolTip("the embedded engine has no prefix cache: one state slot per request" if single else "")
        if target.startswith("vllm"):  # vLLM sizes by --gpu-memory-utilization; prefix caching sets mamba_cache_mode
            for widget in (self.strategy, self.chunked_prefill, self.graph_max_bs):
                widget.setEnabled(False)
                widget.setToolTip("SGLang only: vLLM's mamba_cache_mode is align with prefix caching, none without")

    def _memory_edited(self, _value) -> None:
        data = self.preset.currentData()
        if data == MEASURE or (data is not None and abs(data[0] - self.memory.value()) > 1e-6):
            self._select_preset_quietly(self.preset.count() - 1)
        self._share_memory()
        self.schedule()

    # --- the tab contract ---------------------------------------------------------------------
    def set_layer_map(self, layer_map) -> None:
        self.layer_map = layer_map
        self._checkpoint, self._checkpoint_problem = _read_checkpoint(layer_map)
        self.replan()

    def schedule(self, *_args) -> None:
        """Re-plan within 30 ms: a throttle, so holding a spin-box arrow still updates as it goes."""
        if not self._timer.isActive():
            self._timer.start()

    def settings(self) -> dict:
        """The planner's keyword arguments: the shared launch settings (what Validate checks) plus
        this tab's what-ifs (memory fraction, context, SGLang's prefill and graph sizes)."""
        shared = self.state.values()
        target = shared["target"]
        kwargs = {
            "device_memory": int(self.memory.value() * GIB),
            "device": shared["device"],
            "target": target,
            "mem_fraction": None if self.auto_fraction.isChecked() else round(self.fraction.value(), 3),
            "tp": shared["tp"],
            "pp": shared["pp"],
            "kv_dtype": None if shared["kv_dtype"] in (None, "auto") else shared["kv_dtype"],
            "ssm_dtype": shared["mamba_ssm_dtype"],
            "context": self.context.value() or None,
        }
        if target.startswith("vllm"):
            kwargs["disable_radix_cache"] = shared["disable_radix_cache"]
        elif target != "embedded":
            kwargs.update(mamba_strategy=shared["mamba_strategy"], disable_radix_cache=shared["disable_radix_cache"],
                          chunked_prefill_size=self.chunked_prefill.value() or None,
                          cuda_graph_max_bs=self.graph_max_bs.value() or None)
        return kwargs

    def replan(self) -> None:
        self._timer.stop()
        if self.layer_map is None:
            self.plan = None
            self._show_message("Load a model to plan its memory.", error=False)
            self.bar.set_segments([], 1)
            return
        from bringup.core.errors import UserError
        from bringup.core.planner import plan_memory

        kwargs = self.settings()
        weights = {}
        if self._checkpoint is not None:  # read once per model, not per what-if step
            from bringup.core.layermap.dtypes import dtype_bytes

            weights = {"weights_bytes": self._checkpoint.bytes_as(dtype_bytes(PLAN_DTYPE))}
        try:
            self.plan = plan_memory(self.layer_map, dtype=PLAN_DTYPE, **weights, **kwargs)
        except Exception as exc:  # UserError: bad input; anything else: a planner bug, shown, not raised
            if not isinstance(exc, UserError):
                traceback.print_exc(file=sys.stderr)
                exc = f"The planner failed: {type(exc).__name__}: {exc}. This is a bug in the workbench; please " \
                      "report it with these settings and the model's config.json"
            self.plan = None
            self._show_message(str(exc), error=True)
            self.bar.set_segments([], kwargs["device_memory"], "Does not fit")
            for card in self.cards.values():
                card.set("\u2014")
            return
        if self.auto_fraction.isChecked():  # show what "auto" came to
            self.fraction.blockSignals(True)
            self.fraction.setValue(self.plan.mem_fraction)
            self.fraction.blockSignals(False)
        if self._checkpoint is not None:
            self.plan.weights_source = "checkpoint"  # handed over as bytes, read from its headers
        self._show_plan(self.plan, kwargs)

    def report_section(self) -> dict:
        """For the session report: the plan's headline figures."""
        if self.plan is None:
            return {}
        return {"plan": self.plan, "plan_device": self._device_label(), "plan_advice": self.advice}

    # --- showing a plan -----------------------------------------------------------------------
    def _show_message(self, text: str, error: bool) -> None:
        self.error = text if error else ""
        colour = "#D62828" if error else "#6b7280"
        self.message.setText(f"<span style='color:{colour}'>{html.escape(text)}</span>" if text else "")
        self.message.setVisible(bool(text))

    def _show_plan(self, plan, kwargs: dict) -> None:
        total = kwargs["device_memory"]
        tp_pp = kwargs["tp"] * kwargs["pp"]
        segments = plan_segments(plan)
        per_device = f" per device (TP {kwargs['tp']} \u00d7 PP {kwargs['pp']})" if tp_pp > 1 else ""
        verdict = "fits" if plan.ok else "does not fit"
        device = self._device_label()
        self.bar.set_segments(segments, total, f"{device}: {format_bytes(total, short=True)} of device memory"
                                               f"{per_device}: {verdict}", device_label=device)
        problems = [str(p) for p in plan.problems]
        if not plan.ok and plan.weights_bytes > total:  # advice that can work: shard them
            from .plan_advice import smallest_fit

            self.advice = smallest_fit(self.layer_map, kwargs["target"], self.state.launch_settings(), total)
            problems.append(self.advice.text(device))
        else:
            self.advice = None
        notes = [str(n) for n in plan.notes]
        if self._checkpoint_problem:
            notes.insert(0, f"weights from the parameter count: {self._checkpoint_problem}")
        self._show_message(" \u00b7 ".join(problems or notes), error=bool(problems))
        assumed = plan.assumed
        self.assumed.setText(assumed_text(assumed))
        self.assumed.setToolTip("\n".join(f"{k} = {v}" for k, v in assumed.items()))
        self.assumed.setVisible(bool(assumed))
        bottleneck = plan.bottleneck
        page = plan.page_size
        self.cards["kv_tokens"].set(
            fmt_count(plan.kv_tokens),
            f"{format_bytes(plan.kv_bytes_per_token or 0, short=True)} per token" + (f", page {page}" if page else ""),
            accent="#D62828" if bottleneck == "kv" else None,
        )
        self.cards["state_slots"].set(
            fmt_count(plan.state_slots),
            f"{format_bytes(plan.state_bytes_per_request or 0, short=True)} per request",
            accent="#D62828" if bottleneck == "state" else None,
        )
        self.cards["max_running_requests"].set(fmt_count(plan.max_running_requests), running_note(plan))
        self.cards["bottleneck"].set(bottleneck_name(bottleneck), bottleneck_note(plan))
        table, meaning = comparison_html(plan, self.layer_map)
        self.compare.setText(table)
        self.compare_text.setText(meaning)
        stages = plan.stages
        self.stage_box.setVisible(len(stages) > 1)
        self.stage_table.set_stages(stages, busiest_stage(plan))

    def _stage_selected(self) -> None:
        """Show the selected stage's layers on the map (outlined, not red: nothing is wrong)."""
        rows = self.stage_table.selectionModel().selectedRows() if self.stage_table.selectionModel() else []
        if not rows or self.layer_map is None:
            self.highlight_requested.emit(None)
            return
        from bringup.app.layermap.highlight import Highlight

        stage = self.stage_table.stages[rows[0].row()]
        first, last = stage.layers
        self.highlight_requested.emit(Highlight(
            requested=[], related=list(range(first, last + 1)), severity="info",
            message=f"PP stage {stage.stage}: layers {first}\u2013{last}, {stage.kv_layers} KV and "
                    f"{stage.state_layers} state layers"))

    def _device_label(self) -> str:
        """The device as its preset names it ("Intel Arc Pro B60"), else its kind."""
        data = self.preset.currentData()
        if isinstance(data, tuple):
            return self.preset.currentText().split(" \u00b7 ")[0]
        return {"cuda": "CUDA device", "xpu": "Intel XPU", "cpu": "CPU"}.get(self.device.currentText(),
                                                                            self.device.currentText())
