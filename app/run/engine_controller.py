"""Owns one engine for the window: launch or attach, follow start-up, scrape metrics, detect a crash.

The engine is a child process (core.engine_process); its log arrives on a reader thread and the
metrics on a scraper thread, and both reach widgets only through queued Qt signals. Nothing here
blocks the window: stopping runs in a thread too, because killing a tree may wait seconds.
"""

from __future__ import annotations

import http.client
import importlib.util
import sys
import threading
import time
import urllib.request

from PySide6.QtCore import QObject, QTimer, Signal

from bringup.core.client.engine_records import redact_argv
from bringup.core.client.engine_process import EngineProcess, free_port
from bringup.core.client.metrics_scrape import EngineSample, MetricsReader, fetch_metrics
from bringup.core.client.server_http import get, split_base_url, why_unreachable
from bringup.core.client.startup_log import StartupState
from bringup.core.launch import Endpoint, Launch

SCRAPE_INTERVAL_S = 0.25
# A scrape that takes longer counts as no answer: a lost engine shows as lost within a second.
SCRAPE_TIMEOUT_S = 0.6
# Attach: how long /metrics may take to give a first sample before the attach is refused.
ATTACH_METRICS_S = 8.0


def sglang_installed() -> bool:
    return importlib.util.find_spec("sglang") is not None


def vllm_installed() -> bool:
    """A `vllm` command in this environment or on PATH (core/launch/vllm.py: what Run would start)."""
    from bringup.core.launch.vllm import installed

    return installed()


class EngineController(QObject):
    log_line = Signal(str)
    stage_changed = Signal(str, float)  # stage, progress 0..1
    figures_changed = Signal(dict)  # start-up figures: pool sizes, weights...
    ready = Signal(str)  # base URL
    sample = Signal(object)  # EngineSample
    crashed = Signal(int, list)  # exit code, last log lines
    stopped = Signal()
    # idle | starting | connecting | ready | attached | lost | stopping | crashed | unreachable
    state_changed = Signal(str)
    server_info = Signal(dict)  # GET /server_info once ready (device, pools predicted vs allocated)
    attach_failed = Signal(str)  # why an attach never became Ready
    lost = Signal(str)  # a Ready engine stopped answering: why
    regained = Signal()  # ... and answers again
    _stop_done = Signal()  # from the stopping thread back to the GUI thread
    _scrape_event = Signal(str, str)  # (kind, detail) from the scraper thread: metrics | lost | back | refused

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state = "idle"
        self.base_url: str | None = None
        self.process: EngineProcess | None = None
        self.startup = StartupState()
        self.api_key: str | None = None
        self.info: dict = {}
        self._scrape_stop = threading.Event()
        self._scraper: threading.Thread | None = None
        self._watch = QTimer(self)
        self._watch.setInterval(200)
        self._watch.timeout.connect(self._check_process)
        self.log_line.connect(self._on_line)
        self._stop_done.connect(self._on_stop_done)
        self._scrape_event.connect(self._on_scrape_event)
        self.lost_reason = ""

    # lifecycle
    def _set_state(self, state: str) -> None:
        self.state = state
        self.state_changed.emit(state)

    @property
    def busy(self) -> bool:
        return self.state in ("starting", "connecting", "ready", "attached", "lost", "stopping")

    def start(self, launch: Launch, *, host: str = "127.0.0.1", port: int | None = None) -> Endpoint:
        """Start `launch` (as Validate showed it) on `port` of `host` (None or 0: a free one), with this interpreter."""
        endpoint = Endpoint(host, port or free_port(host))
        self.launch(launch.argv(endpoint=endpoint, python=sys.executable), endpoint.url, engine=launch.engine)
        return endpoint

    def launch_embedded(self, source: str, *, device: str = "cpu", host: str = "127.0.0.1",
                        extra: list[str] | None = None, port: int | None = None) -> int:
        """Our engine on `source` with serve options `extra` (the demo's profile), on `port` (None: a free one)."""
        from bringup.core.rules.settings import LaunchSettings

        launch = Launch("embedded", source, LaunchSettings(device="cpu"), device=device, extra=tuple(extra or ()))
        return self.start(launch, host=host, port=port).port

    def launch(self, argv: list[str], base_url: str, *, engine: str = "embedded") -> None:
        """Start `argv`; `engine` says whose start-up lines to follow (vLLM logs its own)."""
        if self.busy:
            raise RuntimeError("an engine is already running; stop it first")
        self.startup = StartupState(engine=engine)
        self.base_url = base_url
        self.process = EngineProcess(argv, on_line=self.log_line.emit, url=base_url)  # emitted from the reader thread
        self._set_state("starting")
        self.stage_changed.emit("starting", 0.02)
        self.log_line.emit("$ " + " ".join(redact_argv(argv)))  # a key on the command line stays out of the log
        self.process.start()
        self._watch.start()

    def attach(self, base_url: str, api_key: str | None = None) -> None:
        """Follow a server that is already running (ours, or SGLang with --enable-metrics).

        It is Ready ("attached") only once /health answers and /metrics gives a first sample;
        until then the state is "connecting", and a server that never gets there is refused with
        the reason (`attach_failed`), never shown as Ready."""
        if self.busy:
            raise RuntimeError("an engine is already running; stop it first")
        try:
            split_base_url(base_url)
        except ValueError as err:
            raise RuntimeError(str(err)) from None
        self.base_url = base_url.strip().rstrip("/")
        self.api_key = api_key or None
        self.process = None
        self._set_state("connecting")
        self.stage_changed.emit("connecting", 0.3)
        self._start_scraper(attach=True)

    def stop(self) -> None:
        """Stop scraping; end the launched process tree (in a thread). Attached servers stay up."""
        self._stop_scraper()
        self._watch.stop()
        proc = self.process
        if proc is None or not proc.running:
            self._set_state("idle")
            self.stopped.emit()
            return
        self._set_state("stopping")

        def _stop() -> None:
            proc.stop(timeout=5.0)
            self._stop_done.emit()

        threading.Thread(target=_stop, name="engine-stop", daemon=True).start()

    def _on_stop_done(self) -> None:
        self._set_state("idle")
        self.stopped.emit()

    def stop_blocking(self, timeout: float = 10.0) -> None:
        """For window close and tests: stop and wait until the tree is gone."""
        self._stop_scraper()
        self._watch.stop()
        if self.process is not None and self.process.running:
            self.process.stop(timeout=min(timeout, 5.0))
        self._set_state("idle")

    # log and process watch
    def _on_line(self, line: str) -> None:
        if line.startswith("$ "):
            return  # our own echo of the command: its arguments are not the engine's start-up
        if self.startup.feed(line):
            self.stage_changed.emit(self.startup.stage, self.startup.progress)
            self.figures_changed.emit(dict(self.startup.figures))
            if self.startup.ready and self.state == "starting":
                self._set_state("ready")
                self.ready.emit(self.base_url or "")
                self._start_scraper()

    def _check_process(self) -> None:
        proc = self.process
        if proc is None or self.state not in ("starting", "ready", "lost"):
            return
        code = proc.poll()
        if code is None:
            return
        self._watch.stop()
        self._stop_scraper()
        proc.end_leftovers()
        proc.wait_log_drained()
        self._set_state("crashed")
        self.crashed.emit(code, proc.tail(60))

    # metrics
    def _start_scraper(self, attach: bool = False) -> None:
        self._stop_scraper()
        self._scrape_stop = threading.Event()
        stop_event, url, key = self._scrape_stop, self.base_url, self.api_key
        launched = not attach and self.process is not None

        def _loop() -> None:
            try:
                _scrape()
            except RuntimeError:  # the controller was deleted under the thread (its window closed): stop
                stop_event.set()

        def _scrape() -> None:
            if attach:
                try:
                    get(url, "/health", key, timeout=1.5)
                except (OSError, ValueError, http.client.HTTPException) as err:
                    self._scrape_event.emit("refused", f"{url}/health did not answer: {why_unreachable(err)}")
                    return
            info = _get_json(f"{url}/server_info", key)
            if isinstance(info, dict) and not stop_event.is_set():
                self.info = info
                self.server_info.emit(info)
            reader = MetricsReader()
            answering, first, slow_misses = True, True, 0
            deadline = time.monotonic() + ATTACH_METRICS_S
            while not stop_event.is_set():
                t = time.monotonic()
                problem = ""
                try:
                    sample = reader.sample(fetch_metrics(url, timeout=SCRAPE_TIMEOUT_S, api_key=key), t)
                    if reader.prefix is None:
                        problem = "/metrics has no engine figures (SGLang needs --enable-metrics)"
                except (OSError, ValueError, http.client.HTTPException) as err:
                    sample = EngineSample(t=t)  # unreachable: a gap, not a false zero
                    problem = why_unreachable(err)
                if stop_event.is_set():
                    break
                if not problem:
                    slow_misses = 0
                if attach and first:  # Ready only once the figures really arrive
                    if not problem:
                        first = False
                        self._scrape_event.emit("metrics", "")
                    elif time.monotonic() > deadline or "API key" in problem:
                        self._scrape_event.emit("refused", f"{url}/metrics: {problem}")
                        return
                elif problem and answering:
                    slow_misses = slow_misses + 1 if "timed out" in problem else 0
                    # A launched engine's death is seen by the process watch at once; a slow answer
                    # from its busy CPU is given one more chance before it is called lost.
                    if not (launched and 0 < slow_misses < 2):
                        answering = False
                        self._scrape_event.emit("lost", problem)
                elif not problem and not answering:
                    answering = True
                    self._scrape_event.emit("back", "")
                self.sample.emit(sample)
                stop_event.wait(max(0.0, SCRAPE_INTERVAL_S - (time.monotonic() - t)))

        self._scraper = threading.Thread(target=_loop, name="metrics-scraper", daemon=True)
        self._scraper.start()

    def _on_scrape_event(self, kind: str, detail: str) -> None:
        if kind == "metrics" and self.state == "connecting":
            self._set_state("attached")
            self.ready.emit(self.base_url or "")
        elif kind == "refused" and self.state == "connecting":
            self._scrape_stop.set()
            self._set_state("unreachable")
            self.attach_failed.emit(detail)
        elif kind == "lost" and self.state in ("ready", "attached"):
            self._state_before_lost = self.state
            self.lost_reason = detail
            self._set_state("lost")
            self.lost.emit(detail)
        elif kind == "back" and self.state == "lost":
            self.lost_reason = ""
            self._set_state(getattr(self, "_state_before_lost", "attached"))
            self.regained.emit()

    def _stop_scraper(self) -> None:
        self._scrape_stop.set()
        if self._scraper is not None:
            self._scraper.join(timeout=2.0)
            self._scraper = None

    def health(self, timeout: float = 1.0) -> bool:
        if not self.base_url:
            return False
        try:
            with urllib.request.urlopen(self.base_url + "/health", timeout=timeout) as resp:  # noqa: S310
                return resp.status == 200
        except OSError:
            return False



def _get_json(url: str, api_key: str | None, timeout: float = 2.0):
    """A JSON document, or None when the server has no such endpoint or is unreachable."""
    import json

    req = urllib.request.Request(url)
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (local URL by design)
            return json.loads(resp.read().decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None


def device_text(info: dict) -> str:
    """"cuda:0 (NVIDIA H200)" from a /server_info document; "" when it names no device."""
    device, name = info.get("device") or "", info.get("device_name") or ""
    return f"{device} ({name})" if device and name and name != device else device or name
