"""The Compare tab: two runs, one answer.

"Compare servers" sends the same greedy prompts to two running servers (`bringup ab URL_A URL_B`):
each prompt's agreement, where it parts with both tokens and their logprob gap, and the verdict
against noise calibrated on A. "Compare layers" runs the model under two engine settings
(`bringup ab --layers`): the step timeline (prefill, then each decode step) with its worst block and
routing flips, and on the map each block's error at the step where they first part, that block
marked. Both run as child processes waited on from a thread (core/compare does the work; the window
never imports torch and never freezes).
"""

from __future__ import annotations

import tempfile

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QCheckBox, QFormLayout, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPlainTextEdit, QPushButton,
                               QSpinBox, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from bringup.app.layermap.highlight import Highlight
from bringup.app.tabs.numerics_panel import CommandRunner
from bringup.core.compare.divergence import after_parting_text, flips_text
from bringup.core.compare.step_logprobs import answer_text

AB_COLUMNS = ["agree", "parts at", "A", "B", "gap", "prompt"]
DEFAULT_A = "http://127.0.0.1:30000"
DEFAULT_SETTING_A = "kernels=reference,dtype=float32"
STEP_COLUMNS = ["step", "kind", "token A", "B alone", "worst block", "rel err", "flips"]


def layers_highlight(doc: dict) -> Highlight:
    """Each block's error at the step where the runs first part (the last step when they never do);
    a recurrent state that parts before any output is named first, its layer marked beside the block."""
    first, state = doc.get("first"), doc.get("first_state")
    steps = doc.get("steps") or []
    step = first["step"] if first else (steps[-1]["step"] if steps else 0)
    errors = tuple((e["block"], e["rel_err"]) for e in doc.get("errors", []) if e["step"] == step)
    if state and (not first or state["step"] < first["step"]):
        message = (f"layer {state['block']}'s {state['what']} parts first, after step {state['step']} "
                   f"({state['kind']}, rel err {state['rel_err']:.2e})")
        if first:
            message += f"; block {first['block']}'s output then parts at step {step}"
        marked = [state["block"]] + ([first["block"]] if first and first["block"] != state["block"] else [])
        return Highlight(requested=marked, message=message, severity="error", errors=errors,
                         tolerance=doc.get("tolerance"))
    if first:
        message = (f"block {first['block']} parts first, at step {step} ({first['kind']}), "
                   f"{first['cause']}, rel err {first['rel_err']:.2e}")
        return Highlight(requested=[first["block"]], message=message, severity="error", errors=errors,
                         tolerance=doc.get("tolerance"))
    return Highlight(message=f"no block parts over {len(steps)} steps", severity="info", errors=errors,
                     tolerance=doc.get("tolerance"))


class CompareTab(QWidget):
    title = "Compare"
    highlight_requested = Signal(object)
    finished = Signal(str, object)  # (kind, document or error text): for tests and the session report

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source: str | None = None
        self.last: dict[str, dict] = {}
        self.runner = CommandRunner(self)
        self.runner.finished.connect(self._done)
        self._offered: str | None = None  # the last URL the Run tab offered as A
        self._offered_dump: str | None = None  # the last dump setting the Run tab offered as A
        self.url_a, self.url_b = QLineEdit(DEFAULT_A), QLineEdit()
        self.key_a, self.key_b = QLineEdit(), QLineEdit()
        for key in (self.key_a, self.key_b):
            key.setEchoMode(QLineEdit.EchoMode.Password)
            key.setPlaceholderText("API key (if the server needs one)")
        self.url_b.setPlaceholderText("http://host:8000 (SGLang, vLLM, llama.cpp or ours)")
        self.prompts = QPlainTextEdit()
        self.prompts.setPlaceholderText("one prompt per line (empty: a fixed set)")
        self.prompts.setMaximumHeight(80)
        self.max_tokens = QSpinBox(minimum=1, maximum=4096, value=32)
        self.setting_a, self.setting_b = QLineEdit(DEFAULT_SETTING_A), QLineEdit("dtype=bfloat16")
        for setting in (self.setting_a, self.setting_b):
            setting.setToolTip("key=value,... of device, dtype, kernels (reference or the engine's), load_format, "
                               "fault (scale@L=F, state@L); or dump=DIR: an SGLang --debug-tensor-dump-output-folder, "
                               "read as a run (our engine on the other side reads its tokens and experts)")
        self.steps = QSpinBox(minimum=0, maximum=256, value=4)
        self.look = QCheckBox("look inside where they part")
        self.look.setToolTip("runs both settings again, keeping that block's tensors whole: which tokens and "
                             "channels hold the error (the traces keep checksums and a sketch otherwise)")
        self.servers_button, self.layers_button = QPushButton("Compare servers"), QPushButton("Compare layers")
        self.servers_button.clicked.connect(self.compare_servers)
        self.layers_button.clicked.connect(self.compare_layers)
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        self.table = QTableWidget(0, 0)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        form = QFormLayout()
        for label, a, b in (("Server A / B", self.url_a, self.url_b), ("Keys", self.key_a, self.key_b),
                            ("Settings A / B", self.setting_a, self.setting_b)):
            row = QHBoxLayout()
            row.addWidget(a)
            row.addWidget(b)
            form.addRow(label, row)
        form.addRow("Prompts", self.prompts)
        counts = QHBoxLayout()
        counts.addWidget(QLabel("max tokens"))
        counts.addWidget(self.max_tokens)
        counts.addWidget(QLabel("decode steps"))
        counts.addWidget(self.steps)
        counts.addWidget(self.look)
        counts.addStretch(1)
        counts.addWidget(self.servers_button)
        counts.addWidget(self.layers_button)
        box = QVBoxLayout(self)
        box.addLayout(form)
        box.addLayout(counts)
        box.addWidget(self.verdict)
        box.addWidget(self.table, 1)

    def use_running(self, url: str) -> None:
        """The Run tab's engine became ready: it is server A, unless the user typed another A."""
        if self.url_a.text().strip() in ("", DEFAULT_A) or self.url_a.text().strip() == self._offered:
            self.url_a.setText(url)
        self._offered = url

    def use_dump(self, folder: str) -> None:
        """SGLang started dumping its layers into `folder`: setting A reads that dump (our engine, as
        B, then runs on its tokens and experts), unless the user typed another setting A."""
        if self.setting_a.text().strip() in (DEFAULT_SETTING_A, self._offered_dump or ""):
            self.setting_a.setText(f"dump={folder}")
        self._offered_dump = f"dump={folder}"

    def set_layer_map(self, layer_map) -> None:
        self.source = getattr(layer_map, "source", None) if layer_map is not None else None
        self.layers_button.setEnabled(self.source is not None and not self.runner.running)

    def compare_servers(self) -> bool:
        argv = ["ab", self.url_a.text().strip(), self.url_b.text().strip(), "--max-tokens", str(self.max_tokens.value())]
        for flag, key in (("--api-key-a", self.key_a), ("--api-key-b", self.key_b)):
            if key.text().strip():
                argv += [flag, key.text().strip()]
        text = self.prompts.toPlainText().strip()
        if text:
            with tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="bringup-prompts-", delete=False,
                                             encoding="utf-8") as f:
                f.write(text + "\n")
            argv += ["--prompts", f.name]
        return self._start("servers", argv)

    def compare_layers(self) -> bool:
        if self.source is None:
            return False
        argv = ["ab", "--layers", self.source, "--a", self.setting_a.text().strip(),
                "--b", self.setting_b.text().strip(), "--steps", str(self.steps.value())]
        return self._start("layers", argv + (["--full", "first"] if self.look.isChecked() else []))

    def _start(self, kind: str, argv: list[str]) -> bool:
        if not self.runner.start(kind, argv):
            return False
        self.servers_button.setEnabled(False)
        self.layers_button.setEnabled(False)
        self.verdict.setText(f"running bringup {' '.join(a if not a.startswith('sk-') else '***' for a in argv)} ...")
        return True

    def report_section(self) -> dict:
        """For the session report: the last comparison of each kind, as its JSON document."""
        return {"ab": dict(self.last)} if self.last else {}

    def _done(self, kind: str, result) -> None:
        self.servers_button.setEnabled(True)
        self.layers_button.setEnabled(self.source is not None)
        if not isinstance(result, dict):
            self.verdict.setText(f"<b>Could not compare:</b> {result}")
        else:
            self.last[kind] = result
            (self._show_servers if kind == "servers" else self._show_layers)(result)
        self.finished.emit(kind, result)

    def _fill(self, columns: list[str], rows: list[list]) -> None:
        self.table.clear()
        self.table.setColumnCount(len(columns))
        self.table.setHorizontalHeaderLabels(columns)
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                self.table.setItem(r, c, QTableWidgetItem("" if value is None else str(value)))

    def _show_servers(self, doc: dict) -> None:
        v = doc["verdict"]
        self.verdict.setText(f"<b>{v['word']}</b>: {v['reason']}")
        rows = []
        for p in doc["prompts"]:
            d = p["divergence"] or {}
            gaps = [g for g in (d.get("a_gap"), d.get("b_gap")) if g is not None]
            rows.append([f"{p['agreement']:.0%}", d.get("position", "-"), repr(d["a"]) if d else "",
                         repr(d["b"]) if d else "", f"{min(gaps):.2f}" if gaps else "", p["prompt"]])
        self._fill(AB_COLUMNS, rows)

    def _show_layers(self, doc: dict) -> None:
        kinds = {i: f"{m}/{f}" for i, m, f in doc.get("layers", [])}
        first, state = doc.get("first"), doc.get("first_state")
        parts = []
        if state and (not first or state["step"] < first["step"]):
            parts.append(f"layer {state['block']}'s {state['what']} parts first, after step {state['step']}")
        if first:
            parts.append(f"block {first['block']} ({kinds.get(first['block'], '')}) at step {first['step']} "
                         f"({first['kind']}, {first['cause']})")
        flips, after = doc.get("routing_flips", 0), doc.get("routing_flips_after_parting", 0)
        within = f" within {doc['noise_name']}" if doc.get("calibration") else ""
        text = "; ".join(parts) if parts else f"B matches A at every block and state{within}"
        looks = [f"{k['what']} of block {k['block']} at step {k['step']}: exact rel err {k['rel_err']:.2e}, "
                 f"worst token {k['worst_rows'][0][0]}, worst channel {k['worst_columns'][0][0]}"
                 for k in doc.get("looks", []) if "rel_err" in k and k["rel_err"] > 0]
        self.verdict.setText(f"<b>{'differ' if parts else 'agree'}</b>: {text}"
                             + (f". {flips} routing flip(s), counted apart" if flips else "")
                             + (f" ({after_parting_text(flips, after)})" if after else "")
                             + "".join(f"<br>{line}" for line in looks)
                             + (f"<br>tolerances: {doc['calibration']}" if doc.get("calibration") else "")
                             + (f"<br>{answer}" if (answer := answer_text(doc.get("answer_logprob_diffs") or [],
                                                                          doc.get("answer_floor") or 0.0,
                                                                          doc.get("noise_name") or "rounding")) else ""))
        rows = [[s["step"], s["kind"], s["token_a"], s["token_b_own"],
                 "" if s["worst_block"] is None else f"{s['worst_block']} {kinds.get(s['worst_block'], '')}",
                 f"{s['worst_rel_err']:.2e}", flips_text(s["flips"])]
                for s in doc.get("steps", [])]
        self._fill(STEP_COLUMNS, rows)
        self.highlight_requested.emit(layers_highlight(doc))
