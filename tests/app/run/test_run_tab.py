"""The Run tab and demo mode, offscreen, against real processes.

One real engine start (the bundled default checkpoint on CPU) is shared by the whole flow: launch,
metrics arrive and the plots update, chat, load, demo attach, report, stop, no orphans. A crash is
a real child process that dies with the PR #32227 traceback.
"""

import sys
import textwrap
from pathlib import Path

import psutil
from PySide6.QtCore import Qt
import pytest

from bringup.app.layermap.highlight import Highlight
from bringup.app.tabs.run_tab import RunTab
from bringup.core.families import build_layer_map

from repo_paths import SHARED_MODELS

SHARED = SHARED_MODELS

CRASH = textwrap.dedent("""\
    import sys
    print("[2026-07-23 10:00:00] Load weight begin. avail mem=60.00 GB", flush=True)
    print("Traceback (most recent call last):", flush=True)
    print('  File "sglang/srt/layers/attention/triton_backend.py", line 112, in __init__', flush=True)
    print("ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])", flush=True)
    sys.exit(1)
""")


def _nemotron():
    import json

    text = (SHARED / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json").read_text()
    return build_layer_map(json.loads(text), name="NVIDIA-Nemotron-3-Nano-30B-A3B", source="test")


def _children():
    return [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]


@pytest.fixture
def cpu_run_tab(qtbot):
    """A shown Run tab on Nemotron-3-Nano's map, set to launch on the CPU. Its engine (and any load) is
    stopped after the test however the test ends: one left running fails the next tests' checks that
    no child process is left."""
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.show()
    tab.set_layer_map(_nemotron())
    tab.device.setCurrentText("cpu")
    yield tab
    tab.load.stop()
    tab.controller.stop_blocking()


def test_crash_is_reported_and_lights_up_the_layer(qtbot):
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.set_layer_map(_nemotron())
    highlights, logs = [], []
    tab.highlight_requested.connect(highlights.append)
    tab.crash_log.connect(logs.append)
    with qtbot.waitSignal(tab.controller.crashed, timeout=20000) as crashed:
        tab.controller.launch([sys.executable, "-c", CRASH], "http://127.0.0.1:1")
    assert crashed.args[0] == 1
    assert "exited with code 1" in tab.stage.text()
    marks = [h for h in highlights if isinstance(h, Highlight)]
    assert marks and marks[0].requested == [0]
    assert marks[0].related == [5, 12, 19, 26, 33, 42]
    assert logs and "layer_id=0" in logs[0]
    assert tab.log.counts["error"] >= 1
    assert tab.start_button.isEnabled()  # ready for the next launch


def test_attach_to_a_dead_port_is_never_ready(qtbot):
    from bringup.core.client.engine_process import free_port

    tab = RunTab()
    qtbot.addWidget(tab)
    tab.ensure_plots()
    tab.select_engine("attach")
    tab.url_field.setText(f"http://127.0.0.1:{free_port()}")  # nothing listens there
    states, readies = [], []
    tab.controller.state_changed.connect(states.append)
    tab.controller.ready.connect(readies.append)
    with qtbot.waitSignal(tab.controller.attach_failed, timeout=10000) as failed:
        tab.start()
    assert "connection refused" in failed.args[0]
    assert readies == [] and "attached" not in states and "ready" not in states
    assert tab.controller.state == "unreachable" and not tab.controller.busy
    assert "Not attached" in tab.stage.text() and "Ready" not in tab.stage.text()
    assert tab.reason.isVisibleTo(tab) and "connection refused" in tab.reason.text()
    assert not tab.plots.panel_has_data("KV pool") and not tab.plots.panel_has_data("Throughput")
    assert tab.start_button.isEnabled() and not tab.chat.send_button.isEnabled()
    tab.url_field.setText("127.0.0.1:30000")  # no scheme: refused with what to type, before any request
    tab.start()
    assert "http://127.0.0.1:30000" in tab.reason.text() and tab.controller.state == "unreachable"


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_real_engine_flow(qtbot, tmp_path, cpu_run_tab):
    tab = cpu_run_tab
    tab.resize(1400, 800)
    assert tab.model_field.text() == "default"
    with qtbot.waitSignal(tab.controller.ready, timeout=300000):
        tab.start()
    figures = tab.controller.startup.figures
    assert figures.get("kv_tokens", 0) > 0 and figures.get("state_slots", 0) > 0
    assert "KV pool" in tab.figures.text()

    # metrics arrive and the plots update
    qtbot.waitUntil(lambda: tab.plots.panel_has_data("KV pool") and tab.plots.panel_has_data("State pool"), timeout=15000)
    assert tab.plots.history.last("kv_total") == figures["kv_tokens"]

    # what runs, from /server_info: the chat names it and sends its name as the request's model
    qtbot.waitUntil(lambda: tab.served is not None, timeout=15000)
    assert tab.served.name.startswith("nemotron-3-nano-pattern-tiny") and tab.served.random_weights
    assert tab.served.name in tab.chat.who.text()

    # chat: a streamed answer with its figures
    tab.chat.max_tokens.setValue(12)
    tab.chat.send("Hello there")
    qtbot.waitUntil(lambda: len(tab.chat.samples) == 1, timeout=60000)
    sample = tab.chat.samples[0]
    assert sample["answer"] and sample["ttft_s"] is not None
    assert sample["model"] == tab.served.name and sample["random_weights"]
    assert "tok/s" in tab.chat.figures.text()

    # load fills the pools; the graphs see requests running
    tab.load.concurrency.setValue(4)
    tab.load.output_min.setValue(16)
    tab.load.output_max.setValue(24)
    tab.load.start()
    qtbot.waitUntil(lambda: (tab.plots.history.last("running") or 0) >= 1, timeout=60000)
    qtbot.waitUntil(lambda: tab.load.generator.stats.completed >= 2, timeout=120000)
    qtbot.waitUntil(lambda: (tab.plots.history.last("gen_tok_s") or 0) > 0, timeout=30000)

    # demo mode follows the same engine
    from bringup.app.demo import DemoWindow

    demo = DemoWindow(attach_url=tab.controller.base_url)
    qtbot.addWidget(demo)
    demo.resize(1280, 720)
    demo.show()
    qtbot.waitUntil(lambda: demo.big.text() not in ("—", ""), timeout=30000)
    assert demo.kv_gauge.fraction is not None
    demo.close()

    tab.load.stop()
    assert not tab.load.running
    # the stopped load's requests are aborted: the pools drain
    qtbot.waitUntil(lambda: (tab.plots.history.last("kv_used") or 0) == 0 and (tab.plots.history.last("running") or 0) == 0,
                    timeout=30000)

    # report and exports
    report = tab.export_report(tmp_path / "session.html")
    text = report.read_text()
    assert "Live metrics" in text and "Hello there" in text and "KV" in text
    tab.plots.export_csv(tmp_path / "m.csv")
    assert (tmp_path / "m.csv").read_text().startswith("t_seconds,kv_used")

    # stop leaves no process behind
    with qtbot.waitSignal(tab.controller.stopped, timeout=20000):
        tab.stop()
    assert not _children()


def test_validated_launch_is_the_next_start(qtbot):
    from bringup.core.launch import Endpoint, Launch
    from bringup.core.rules.settings import LaunchSettings

    tab = RunTab()
    qtbot.addWidget(tab)
    tab.model_field.setText("default")
    tab.apply_launch(Launch("embedded", "default", LaunchSettings(device="cpu", dtype="float32")))
    assert tab.engine_key() == "embedded" and tab.device.currentText() == "cpu"
    assert tab.next_launch().argv() == ["bringup", "serve", "default", "--device", "cpu", "--dtype", "float32"]
    settings = LaunchSettings(device="xpu", attention_backend="intel_xpu", page_size=128, tp=2, disable_radix_cache=True,
                              linear_attn_backend="triton")
    tab.apply_launch(Launch("sglang", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B", settings))
    assert tab.device.currentText() == "xpu"
    tab.select_engine("sglang")  # (disabled in the list when SGLang is not installed, but settable)
    tab.model_field.setText("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B")
    argv = tab.next_launch().argv(endpoint=Endpoint("127.0.0.1", 30001), python=sys.executable)
    assert argv[1:3] == ["-m", "sglang.launch_server"] and argv[-5:] == ["--host", "127.0.0.1", "--port", "30001",
                                                                          "--enable-metrics"]
    assert argv[argv.index("--tp-size") + 1] == "2" and "--disable-radix-cache" in argv
    assert argv[argv.index("--linear-attn-backend") + 1] == "triton"  # once missing from Run's own command


def test_run_starts_exactly_the_command_validate_shows(qtbot, monkeypatch, tmp_path, shared_models, no_orphans):
    """Validate's command box and the Run tab's child process: the same arguments, Run adding only
    the interpreter and where to listen."""
    import shlex

    from gui_helpers import window_on_nano

    w = window_on_nano(qtbot, monkeypatch, "bringup.app.tabs.validate_tab:ValidateTab", "bringup.app.tabs.run_tab:RunTab")
    validate, run = w.tab("Validate"), w.tab("Run")
    folder = tmp_path / "ckpt"  # a folder with weights: Validate and Run both name it
    folder.mkdir()
    (folder / "config.json").write_text((shared_models / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json").read_text())
    (folder / "model.safetensors").write_bytes(b"")
    from bringup.core.sources.resolve import load_layer_map

    lm = load_layer_map(str(folder))
    validate.set_layer_map(lm)
    run.set_layer_map(lm)
    validate.set_settings(target="embedded", device="cpu", dtype="float32")
    validate.validate()
    shown = shlex.split(validate.command.command())
    assert shown[:3] == ["bringup", "serve", str(folder)]
    run.start()
    try:
        argv = run.controller.process.argv
        assert argv[:4] == [sys.executable, "-m", "bringup", "serve"] and argv[4:-4] == shown[2:]
        assert argv[-4::2] == ["--host", "--port"]
    finally:
        run.controller.stop_blocking()
        validate.probe_runner.stop()
        w.close()


def test_window_wires_validate_to_run_and_run_crashes_to_diagnose(qtbot, monkeypatch):
    from gui_helpers import window_on_nano

    w = window_on_nano(qtbot, monkeypatch, "bringup.app.tabs.validate_tab:ValidateTab", "bringup.app.tabs.run_tab:RunTab",
                       "bringup.app.tabs.diagnose_tab:DiagnoseTab")
    validate, run, diagnose = w.tab("Validate"), w.tab("Run"), w.tab("Diagnose")
    validate.set_settings(target="embedded", device="cpu", dtype="float32")
    validate.validate()
    assert run.device.currentText() == "cpu" and run.launch.settings.dtype == "float32"
    with qtbot.waitSignal(run.controller.crashed, timeout=20000):
        run.controller.launch([sys.executable, "-c", CRASH], "http://127.0.0.1:1")
    qtbot.waitUntil(lambda: "layer_id=0" in diagnose.log.toPlainText(), timeout=10000)
    assert w.map_panel.state.highlight.requested == [0]
    validate.probe_runner.stop()
    w.close()
    w.loader.wait()


def test_what_the_run_tab_serves_for_each_kind_of_source(tmp_path):
    import json

    from bringup.app.run.serve_source import serve_source_for
    from bringup.core.launch import model_path
    from bringup.core.sources.resolve import load_layer_map

    assert serve_source_for(None) == "default"
    assert serve_source_for(load_layer_map("NVIDIA-Nemotron-3-Nano-30B-A3B")) == "default"
    qwen = load_layer_map("Qwen3-8B")
    assert serve_source_for(qwen) == model_path(qwen) == "Qwen/Qwen3-8B"  # a catalogue name launches by hub id
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text((SHARED / "Qwen__Qwen3-8B.json").read_text())
    assert serve_source_for(load_layer_map(str(folder))) == "default"  # no weights here: nothing to serve
    (folder / "model.safetensors").write_bytes(b"")
    assert serve_source_for(load_layer_map(str(folder))) == str(folder)
    assert json.loads((folder / "config.json").read_text())["model_type"] == "qwen3"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_real_engine_killed_is_reported_diagnosed_and_leaves_nothing(qtbot, tmp_path, cpu_run_tab):
    import os
    import signal

    tab = cpu_run_tab
    with qtbot.waitSignal(tab.controller.ready, timeout=240000):
        tab.start()
    qtbot.waitUntil(lambda: tab.plots.panel_has_data("KV pool"), timeout=15000)
    logs = []
    tab.crash_log.connect(logs.append)
    with qtbot.waitSignal(tab.controller.crashed, timeout=20000) as crashed:
        os.kill(tab.controller.process.pid, signal.SIGKILL)  # what the OOM killer does
    assert crashed.args[0] == -signal.SIGKILL
    assert "killed by SIGKILL" in tab.stage.text()
    first = tab.crash_findings[0]
    assert first["code"] == "ENGINE_EXITED" and "out of memory" in first["message"]
    assert logs and "ready to roll" in logs[0]  # the whole log went on to the diagnosis
    text = tab.export_report(tmp_path / "crash.html").read_text()
    assert "ENGINE_EXITED" in text
    qtbot.waitUntil(lambda: not _children(), timeout=10000)
    assert tab.start_button.isEnabled()


def test_clicking_an_error_line_explains_it_and_marks_the_layer(qtbot):
    from PySide6.QtCore import QPoint

    tab = RunTab()
    qtbot.addWidget(tab)
    tab.resize(1200, 700)
    tab.show()
    tab.set_layer_map(_nemotron())
    for line in CRASH.splitlines():  # the stand-in's log, as the console would show it
        if line.startswith("print("):
            tab.log.append(eval(line[len("print("):].split(", flush")[0]))  # noqa: S307 (our own literal)
    highlights = []
    tab.highlight_requested.connect(highlights.append)
    error_line = next(i for i, l in enumerate(tab.log.lines) if l.startswith("ValueError")) + 1
    tab.explain_line(error_line)
    assert tab.log.explanation.isVisible() and "Fix:" in tab.log.explanation.text()
    assert highlights[-1].requested == [0] and highlights[-1].related == [5, 12, 19, 26, 33, 42]
    assert tab.log.lines[error_line - 3].startswith("Traceback")
    tab.explain_line(error_line - 2)  # the "Traceback" header leads to the same finding
    assert "line %d" % error_line in tab.log.explanation.text()
    tab.explain_line(1)  # a plain start-up line explains nothing
    assert not tab.log.explanation.isVisible()
    # a real click on the error line goes the same way
    clicked = []
    tab.log.line_clicked.connect(clicked.append)
    block = tab.log.view.document().findBlockByNumber(error_line - 1)
    rect = tab.log.view.blockBoundingGeometry(block).translated(tab.log.view.contentOffset())
    qtbot.mouseClick(tab.log.view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(20, int(rect.center().y())))
    assert clicked == [error_line]
