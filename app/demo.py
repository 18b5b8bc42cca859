"""Demo mode: the full-screen stakeholder view of inference on the device.

`bringup demo [--profile FILE] [--screenshot PNG --after SECONDS]`: it starts the engine the profile
names (or follows one the Run tab already runs), runs the pinned prompts round and round so the
pools fill, and shows large tokens/s and pool gauges with the layer map. Controls are locked; Esc
leaves, and leaving stops the engine it started.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (QApplication, QGridLayout, QHBoxLayout, QLabel, QListWidget, QListWidgetItem,
                               QTextBrowser, QVBoxLayout, QWidget)

from bringup.app.layermap.style import MIXER_COLORS
from bringup.app.run.engine_controller import EngineController
from bringup.app.run.engine_controller import device_text as _device_text
from bringup.app.run.gauge import Gauge
from bringup.app.run.prompt_runner import PromptRunner
from bringup.core.client.demo_profile import DemoProfile, load_profile
from bringup.core.client.metrics_scrape import EngineSample

_STYLE = """
QWidget#demo { background: #151922; }
QLabel { color: #E9EDF5; }
QLabel#demoTitle { font-size: 22pt; font-weight: 600; }
QLabel#demoSub { color: #9AA3B5; font-size: 12pt; }
QLabel#bigNumber { font-size: 64pt; font-weight: 700; color: #7FD1AE; }
QLabel#bigUnit { color: #9AA3B5; font-size: 14pt; }
QLabel#status { color: #9AA3B5; font-size: 11pt; }
QListWidget, QTextBrowser { background: #1D2230; color: #E9EDF5; border: 1px solid #2C3344; border-radius: 6px;
                            font-size: 12pt; padding: 6px; }
QListWidget::item { padding: 6px 4px; }
QListWidget::item:selected { background: #2C3850; }
QLabel#noise { color: #FFB4A9; font-size: 20pt; font-weight: 700; }
"""


def stakeholder_profile() -> DemoProfile:
    """The demo without --profile: a real-weights model once one is here (SmolLM2's GGUF fetched
    from the package index), else the bundled miniature's pattern demo."""
    from bringup.core.client.demo_profile import DEFAULT_PROFILE
    from bringup.core.sources.packaged import cached_path

    real = DEFAULT_PROFILE.parent / "smollm2.json"
    return load_profile(real if real.is_file() and cached_path("smollm2") is not None else DEFAULT_PROFILE)


def bundled_profile_for(source: str) -> DemoProfile | None:
    """The bundled profile whose map is `source` (a catalogue name, "default", or a fetched file)."""
    from bringup.core.client.demo_profile import DEFAULT_PROFILE
    from bringup.core.sources.packaged import cached_path

    for path in sorted(DEFAULT_PROFILE.parent.glob("*.json")):
        profile = load_profile(path)
        names = {profile.model, profile.layer_map_source or ""}
        fetched = [str(cached_path(n)) for n in names if n and cached_path(n) is not None]
        if source in names or source in fetched:
            return profile
    return None


def profile_for(served) -> DemoProfile:
    """A demo of the model that runs (a ServedModel): its name and device in the title, its map, and
    the pinned prompts of the bundled profile for that model (the default profile's otherwise)."""
    base = bundled_profile_for(served.map_source) or load_profile()
    return DemoProfile(title=f"{served.name} on {served.device_name or served.device or 'this machine'}",
                       model=served.name, device=served.device or "auto", prompts=list(base.prompts),
                       max_tokens=base.max_tokens, temperature=base.temperature, concurrency=base.concurrency,
                       layer_map_source=served.map_source)


class DemoWindow(QWidget):
    def __init__(self, profile: DemoProfile | None = None, *, attach_url: str | None = None,
                 api_key: str | None = None, port: int | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("demo")
        self.setStyleSheet(_STYLE)
        self.setWindowTitle("Bring-up Workbench: demo")
        self.profile = profile or stakeholder_profile()
        self.controller = EngineController(self)
        self.runner: PromptRunner | None = None
        self.answers: dict[int, str] = {}
        self.best_tok_s = 0.0
        self._owns_engine = attach_url is None
        self.figures: dict = {}
        self.no_state_layers = False  # set from /server_info: an attention-only model has no state pool
        self.device_text = self.profile.device
        self.failure = ""  # why the engine is not serving, once it failed (the command's exit code reads it)
        self.setWindowIcon(QApplication.windowIcon())

        self.served = None  # ServedModel, once /server_info answered
        title = QLabel(self.profile.title, objectName="demoTitle")
        title.setWordWrap(True)
        self.title = title
        # Where answers show, in large type: random weights make noise, and the audience must know.
        self.noise = QLabel("Random weights: these answers are noise. They show speed, not what the model knows.",
                            objectName="noise")
        self.noise.setWordWrap(True)
        self.noise.hide()
        self.sub = QLabel("", objectName="demoSub")
        self.status = QLabel("Starting the engine…", objectName="status")
        self.status.setWordWrap(True)  # a long status must not widen a projector-sized window
        self.status.setMaximumWidth(420)
        self.sub.setWordWrap(True)
        self.big = QLabel("—", objectName="bigNumber")
        self.big.setAlignment(Qt.AlignmentFlag.AlignCenter)
        unit = QLabel("tokens / second generated", objectName="bigUnit")
        unit.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.detail = QLabel("", objectName="bigUnit")
        self.detail.setAlignment(Qt.AlignmentFlag.AlignCenter)
        # The gauges wear the map's colours: attention holds the KV pool, Mamba2 the state pool.
        self.kv_gauge = Gauge("KV pool (attention layers)", MIXER_COLORS["attention"])
        self.state_gauge = Gauge("State pool (Mamba2 layers)", MIXER_COLORS["mamba2"])
        self.prompts = QListWidget()
        self.prompts.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # locked: nothing to pick or edit
        self.prompts.setWordWrap(True)
        self.prompts.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        for text in self.profile.prompts:
            QListWidgetItem("○  " + text, self.prompts)
        self.output = QTextBrowser()
        self.layer_map = self._build_layer_map()

        numbers = QVBoxLayout()
        numbers.addStretch(1)
        numbers.addWidget(self.big)
        numbers.addWidget(unit)
        numbers.addWidget(self.detail)
        numbers.addStretch(1)
        top = QHBoxLayout()
        top.addLayout(numbers, 3)
        top.addWidget(self.kv_gauge, 2)
        top.addWidget(self.state_gauge, 2)
        lower = QGridLayout()
        lower.addWidget(QLabel("<b>Pinned prompts</b>"), 0, 0)
        lower.addWidget(QLabel("<b>Latest answer</b>"), 0, 1)
        lower.addWidget(self.prompts, 1, 0, 2, 1)
        lower.addWidget(self.noise, 1, 1)
        lower.addWidget(self.output, 2, 1)
        lower.setColumnStretch(0, 1)
        lower.setColumnStretch(1, 1)
        head = QHBoxLayout()
        head_text = QVBoxLayout()
        head_text.addWidget(title)
        head_text.addWidget(self.sub)
        head.addLayout(head_text, 1)
        head.addWidget(self.status)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(28, 20, 28, 20)
        layout.setSpacing(14)
        layout.addLayout(head)
        layout.addLayout(top, 3)
        if self.layer_map is not None:
            layout.addWidget(self.layer_map)
        layout.addLayout(lower, 3)

        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, activated=self.close)
        c = self.controller
        c.ready.connect(self._on_ready)
        c.sample.connect(self._on_sample)
        c.stage_changed.connect(lambda stage, _p: self.status.setText(f"Engine: {stage}"))
        c.figures_changed.connect(self._on_figures)
        c.crashed.connect(self._on_crash)
        c.server_info.connect(self._on_info)
        c.attach_failed.connect(self._on_attach_failed)
        app = QApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self._update_sub()
        if attach_url:
            c.attach(attach_url, api_key)
        else:
            c.launch_embedded(self.profile.model, device=self.profile.device, extra=self.profile.serve_flags(), port=port)

    def _build_layer_map(self) -> QWidget | None:
        from bringup.app.layermap.view import LayerMapView
        from bringup.core.errors import UserError
        from bringup.core.sources.resolve import load_layer_map

        source = self.profile.layer_map_source
        if not source:
            from bringup.core.sources.catalogue import DEFAULT_MODEL

            source = DEFAULT_MODEL
        try:
            layer_map = load_layer_map(source)
        except UserError:
            return None  # the demo goes on without the map rather than failing in front of people
        view = LayerMapView()
        view.set_layer_map(layer_map)
        return view

    # engine events
    def _on_ready(self, url: str) -> None:
        self.status.setText("Engine ready · running the pinned prompts")
        self.runner = PromptRunner(url, self.profile.prompts, concurrency=self.profile.concurrency,
                                   max_tokens=self.profile.max_tokens, temperature=self.profile.temperature,
                                   api_key=self.controller.api_key, parent=self)
        self.runner.started.connect(self._on_prompt_started)
        self.runner.piece.connect(self._on_piece)
        self.runner.finished.connect(self._on_prompt_done)
        self.runner.start()

    def _on_figures(self, f: dict) -> None:
        self.figures.update(f)
        self._update_sub()

    def _on_info(self, info: dict) -> None:
        from bringup.core.client.running_label import ServedModel, running_label

        self.served = ServedModel.from_info(info, self.controller.base_url or "")
        self.device_text = self.served.device_name or _device_text(info) or self.device_text
        self.running = running_label(info)  # what really runs, random weights labelled as such
        self.noise.setVisible(self.served.random_weights)
        if self.served.state_layers == ():
            self.state_gauge.title = "State pool (no recurrent layers)"  # not "Mamba2 layers" it does not have
            self.state_gauge.setToolTip(f"{self.served.name} has no recurrent layers: no state pool")
            self.state_gauge.update()
        # An attention-only model (SmolLM2, Llama) keeps no recurrent state: say so rather than
        # show the per-request slots the engine books for it as a Mamba2 pool.
        self.no_state_layers = info.get("state_layers") == []
        self._update_sub()

    def _update_sub(self) -> None:
        running = getattr(self, "running", "")
        model = self.served.name if self.served is not None else self.profile.model
        parts = [f"model: {model}", running or (f"on {self.device_text}" if self.device_text else "")]
        parts = [p for p in parts if p]
        if "kv_tokens" in self.figures:
            parts.append(f"KV pool {self.figures['kv_tokens']:,} tokens")
        if "state_slots" in self.figures:
            parts.append(f"state pool {self.figures['state_slots']:,} slots")
        self.sub.setText(" · ".join(parts))

    def _on_sample(self, s: EngineSample) -> None:
        if s.gen_tok_s is not None:
            self.big.setText(f"{s.gen_tok_s:,.1f}")
            self.best_tok_s = max(self.best_tok_s, s.gen_tok_s)
        running = "—" if s.running is None else f"{s.running:.0f}"
        self.detail.setText(f"{running} requests running · best {self.best_tok_s:,.1f} tok/s")
        kv = s.kv_used / s.kv_total if s.kv_used is not None and s.kv_total else s.full_token_usage
        state = s.state_used / s.state_total if s.state_used is not None and s.state_total else s.mamba_usage
        self.kv_gauge.set_value(kv, _used_of(s.kv_used, s.kv_total, "tokens"))
        if self.no_state_layers:
            self.state_gauge.set_value(None, "none: every layer is attention")
        else:
            self.state_gauge.set_value(state, _used_of(s.state_used, s.state_total, "slots"))

    def _on_crash(self, code: int, tail: list[str]) -> None:
        from bringup.core.exit_status import exit_text

        self.status.setText(f"<span style='color:#FF8A80'>Engine {exit_text(code)}</span>")
        self.output.setPlainText("\n".join(tail[-20:]))
        last = next((line for line in reversed(tail) if line.strip()), "")
        self.failure = f"the engine {exit_text(code)}" + (f": {last.strip()}" if last else "")

    def _on_attach_failed(self, why: str) -> None:
        self.status.setText("<span style='color:#FF8A80'>Not attached</span>")
        self.output.setPlainText(why)
        self.failure = why

    def _on_prompt_started(self, index: int) -> None:
        self.answers[index] = ""
        self.prompts.item(index).setText("●  " + self.profile.prompts[index])

    def _on_piece(self, index: int, piece: str) -> None:
        self.answers[index] = self.answers.get(index, "") + piece
        self.prompts.setCurrentRow(index)
        self.output.setHtml(f"<p style='color:#9AA3B5'>{html.escape(self.profile.prompts[index])}</p>"
                            f"<p>{html.escape(self.answers[index])}</p>")

    def _on_prompt_done(self, index: int, timing, error: str) -> None:
        mark = "✕" if error else "✓"
        # the server's token count (usage) over the answer's time; chunk counts read low
        figures = f"  ({timing.tok_s:.1f} tok/s)" if timing.tok_s and timing.tokens_counted_by == "server" else ""
        self.prompts.item(index).setText(f"{mark}  {self.profile.prompts[index]}{figures}")

    def serving(self) -> bool:
        return not self.failure and self.controller.state in ("ready", "attached")

    # leaving
    def shutdown(self) -> None:
        if self.runner is not None:
            self.runner.stop()
            self.runner = None
        if self._owns_engine:
            self.controller.stop_blocking()
        else:
            self.controller.stop()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt)
        self.shutdown()
        super().closeEvent(event)


def _used_of(used: float | None, total: float | None, unit: str) -> str:
    if used is None or not total:
        return ""
    return f"{used:,.0f} of {total:,.0f} {unit}"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", help="demo profile JSON (model, device, settings, prompts); "
                        "default: SmolLM2 (real weights) once `bringup models fetch smollm2` got it, else the bundled "
                        "Nemotron-3-Nano pattern demo")
    parser.add_argument("--screenshot", metavar="PNG",
                        help="capture the screen after --after seconds, then exit: 0 when the engine served, 1 when "
                             "it crashed or was not ready by then (the PNG is written either way), 2 for bad input")
    parser.add_argument("--after", type=float, default=30.0, metavar="SECONDS",
                        help="seconds before the screenshot (default 30)")
    parser.add_argument("--windowed", action="store_true",
                        help="a 1600x900 window (or smaller, to fit the screen) instead of full screen")
    parser.add_argument("--port", type=int, default=None, metavar="N",
                        help="the port the demo's engine listens on (default: a free one)")
    parser.add_argument("--load-format", choices=("auto", "dummy"), default=None,
                        help="dummy: the profile's model at full size with seeded random weights (speed, not text)")


def main(args: argparse.Namespace) -> int:
    # a bad profile fails here, before any window or engine
    profile = load_profile(args.profile) if args.profile else stakeholder_profile()
    if getattr(args, "load_format", None):
        profile.settings["load-format"] = args.load_format
    if args.screenshot and args.after <= 0:
        from bringup.core.errors import UserError

        raise UserError("--after must be a positive number of seconds")
    if args.screenshot:  # as `bringup gui --screenshot`: no display needed unless the user chose a platform
        os.environ["QT_QPA_PLATFORM"] = os.environ.get("QT_QPA_PLATFORM") or "offscreen"
    from bringup.app.display_check import display_problem

    problem = None if QApplication.instance() else display_problem()
    if problem:
        from bringup.core.errors import UserError

        raise UserError(problem.replace("bringup gui --screenshot window.png", "bringup demo --screenshot demo.png"))
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Bring-up Workbench")
    from bringup.app.quit_signals import quit_on_signals

    quit_on_signals(app)
    from bringup.app.qt_messages import quiet_known_noise

    quiet_known_noise()
    if args.port is not None and not 0 < args.port < 65536:
        from bringup.core.errors import UserError

        raise UserError(f"--port must be between 1 and 65535, got {args.port}")
    window = DemoWindow(profile, port=args.port)
    if args.screenshot:
        window.resize(1600, 900)
        window.show()
    elif args.windowed:  # 1600x900, or what fits this screen
        from PySide6.QtCore import QRect

        from bringup.app.window_placement import available_area, fit_rect

        area = available_area()
        window.setGeometry(fit_rect(QRect(area.x(), area.y(), 1600, 900), area))
        window.show()
    else:
        window.showFullScreen()
    code = {"value": 0}
    if args.screenshot:
        def capture() -> None:
            path = Path(args.screenshot)
            if not window.grab().save(str(path), "PNG"):
                print(f"bringup demo: could not write {path}", file=sys.stderr)
                code["value"] = 2
            else:
                print(f"screenshot written to {path}")
            if code["value"] == 0 and not window.serving():
                print(f"bringup demo: {window.failure or 'the engine was not ready after ' + format(args.after, 'g') + ' s'}"
                      " (see the screenshot and the log above)", file=sys.stderr)
                code["value"] = 1
            window.close()
            app.quit()

        QTimer.singleShot(int(args.after * 1000), capture)
    app.exec()
    window.shutdown()
    return code["value"]
