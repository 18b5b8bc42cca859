"""Collect a session report from the window: what each part knows goes into one SessionRecord."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QIODevice
from PySide6.QtWidgets import QTabWidget, QWidget

from bringup.core.session_report import SessionRecord, write_report


def _png(widget: QWidget) -> bytes:
    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    widget.grab().save(buf, "PNG")
    return bytes(buf.data())


class SessionExport:
    def __init__(self, record: SessionRecord) -> None:
        self.record = record

    def write(self, path: str | Path) -> Path:
        return write_report(self.record, path)


def plan_rows(plan, device: str, advice=None) -> dict:
    """A MemoryPlan as the report's readers need it: the device named, sizes with their units."""
    from bringup.core.layermap.sizes import format_bytes

    weights_from = {"checkpoint": "read from the checkpoint", "params": "from the parameter count"}
    rows = {
        "device": f"{device or plan.device} ({plan.device}), {format_bytes(plan.device_memory, short=True)}",
        "target": plan.target,
        "parallelism": f"TP {plan.tp} \u00d7 PP {plan.pp}",
        "memory fraction": f"{plan.mem_fraction:.3f}",
        "weights per device": f"{format_bytes(plan.weights_bytes, short=True)} "
                              f"({weights_from.get(plan.weights_source, plan.weights_source)})",
        "KV cache": f"{plan.kv_tokens:,} tokens \u00b7 {format_bytes(plan.kv_bytes_per_token, short=True)} per token",
        "state pool": f"{plan.state_slots:,} slots \u00b7 {format_bytes(plan.state_bytes_per_request, short=True)} per request",
        "max running requests": f"{plan.max_running_requests:,} (limited by {plan.bottleneck})",
        "verdict": "fits" if plan.ok else "does not fit: " + "; ".join(plan.problems),
    }
    if advice is not None:
        rows["advice"] = advice.text(device or plan.device)
    return rows


def collect_session(run_tab) -> SessionExport:
    """Model and layer map from the window, findings and plan from tabs that offer a
    `report_section() -> dict`, graphs, chats, start-up figures and the log from the Run tab."""
    record = SessionRecord()
    lm = run_tab.layer_map
    if lm is not None:
        record.title = f"Bring-up session: {lm.name}"
        record.model = {"name": lm.name, "source": lm.source, "model type": lm.model_type,
                        "architecture": lm.architecture, "hybrid family": lm.family or "none",
                        "layers": lm.num_layers, "full attention layers": lm.full_attention_layers,
                        "state layers": len(lm.state_layers), "parameters": lm.params_total,
                        "active parameters": lm.params_active}
    window = run_tab.window()
    from bringup.app.layermap.view import LayerMapView

    layer_view = window.findChild(LayerMapView) if window is not None else None
    if layer_view is not None:
        record.images["Layer map"] = _png(layer_view)
    tabs = window.findChild(QTabWidget) if window is not None else None
    if tabs is not None:
        for i in range(tabs.count()):
            section = getattr(tabs.widget(i), "report_section", None)
            if callable(section):
                part = section() or {}
                record.findings += part.get("findings", [])
                if part.get("plan") is not None:
                    record.plan.update(plan_rows(part["plan"], part.get("plan_device", ""), part.get("plan_advice")))
                record.numerics.update(part.get("numerics", {}))
    record.findings += run_tab.crash_findings
    if run_tab.plots is not None and len(run_tab.plots.history):
        record.images["Live metrics"] = _png(run_tab.plots)
    record.startup = dict(run_tab.controller.startup.figures)
    record.chats = list(run_tab.chat.samples)
    record.log_tail = run_tab.log.lines[-80:]
    return SessionExport(record)
