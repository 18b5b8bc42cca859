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
        "device": f"{device or plan.device} ({plan.device}), {format_bytes(plan.device_memory)}",
        "target": plan.target,
        "parallelism": f"TP {plan.tp} \u00d7 PP {plan.pp}",
        "memory fraction": f"{plan.mem_fraction:.3f}",
        "weights per device": f"{format_bytes(plan.weights_bytes)} "
                              f"({weights_from.get(plan.weights_source, plan.weights_source)})",
        "KV cache": f"{plan.kv_tokens:,} tokens \u00b7 {format_bytes(plan.kv_bytes_per_token)} per token",
        "state pool": f"{plan.state_slots:,} slots \u00b7 {format_bytes(plan.state_bytes_per_request)} per request",
        "max running requests": f"{plan.max_running_requests:,} (limited by {plan.bottleneck})",
        "verdict": "fits" if plan.ok else "does not fit: " + "; ".join(plan.problems),
    }
    if advice is not None:
        rows["advice"] = advice.text(device or plan.device)
    return rows


def reports_folder() -> Path:
    """Where reports go unless the user picks another folder: Documents/Bring-up reports, never the
    current directory (a git checkout, when started with `make run`)."""
    from PySide6.QtCore import QStandardPaths

    documents = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return Path(documents or Path.home()) / "Bring-up reports"


def report_name(run_tab) -> str:
    """bringup-<model>-<date-time>.html"""
    import re
    import time

    served = run_tab.served or getattr(run_tab, "last_served", None)
    name = served.name if served is not None else run_tab.layer_map.name if run_tab.layer_map is not None else "session"
    return f"bringup-{re.sub(r'[^A-Za-z0-9._-]+', '-', name)[:60]}-{time.strftime('%Y%m%d-%H%M')}.html"


def collect_session(run_tab) -> SessionExport:
    """Model and layer map from the window, findings and plan from tabs that offer a
    `report_section() -> dict`, graphs, chats, start-up figures and the log from the Run tab."""
    record = SessionRecord()
    lm = run_tab.layer_map
    served = run_tab.served or getattr(run_tab, "last_served", None)  # the session's engine, even once stopped
    if served is not None:
        record.served = served.facts()
        record.random_weights = served.random_weights
        record.title = f"Bring-up session: {served.name}"
    elif lm is not None:
        record.title = f"Bring-up session: {lm.name}"
    if lm is not None:
        record.model = {"name": lm.name, "source": lm.source, "model type": lm.model_type,
                        "architecture": lm.architecture, "hybrid family": lm.family or "none",
                        "layers": lm.num_layers, "full attention layers": lm.full_attention_layers,
                        "state layers": len(lm.state_layers), "parameters": lm.params_total}
        if lm.params_active is not None:  # (MoE models only: a dense model's are all of them)
            record.model["active parameters"] = lm.params_active
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
                record.ab.update(part.get("ab", {}))
    record.findings += run_tab.crash_findings
    diagnose = window.tab("Diagnose") if window is not None and hasattr(window, "tab") else None
    if diagnose is not None and hasattr(diagnose, "findings"):  # a log diagnosed there (pasted, opened or a crash)
        seen = {(f.get("code"), tuple(f.get("lines") or ())) for f in record.findings}
        record.findings += [f for f in diagnose.findings.findings()
                            if (f.get("code"), tuple(f.get("lines") or ())) not in seen]
    if run_tab.plots is not None and len(run_tab.plots.history):
        record.images["Live metrics"] = _png(run_tab.plots)
    record.startup = dict(run_tab.controller.startup.figures)
    record.chats = list(run_tab.chat.samples)
    record.log_tail = run_tab.log.lines[-80:]
    return SessionExport(record)
