"""The Run tab with vLLM: offered exactly when a `vllm` command is there, launched as `vllm serve` through the
engine-process machinery, followed through vLLM's own start-up lines, and its `vllm:` metrics graphed.

`vllm` is a stand-in for the external binary (tests/helpers/fake_vllm.py: vLLM's log lines and /metrics names);
everything it talks to is the workbench's own code."""

import os
import sys

import pytest

from bringup.app.tabs.run_tab import RunTab
from bringup.core.client.chat import AnswerTiming, stream_chat
from bringup.core.client.startup_log import StartupState
from bringup.core.launch import Endpoint, Launch
from bringup.core.launch.vllm import vllm_command
from bringup.core.rules.settings import LaunchSettings
from fake_vllm import KV_TOKENS, install

MODEL = "Qwen/Qwen3-Next-80B-A3B-Instruct"


@pytest.fixture
def vllm_on_path(tmp_path, monkeypatch):
    script = install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return script


@pytest.fixture
def no_vllm(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


def test_vllm_is_not_offered_where_there_is_none(qtbot, no_vllm):
    assert vllm_command() is None
    tab = RunTab()
    qtbot.addWidget(tab)
    item = tab.engine.model().item(tab.engine.findData("vllm"))
    assert not item.isEnabled() and "not installed" in item.toolTip()
    tab.apply_launch(Launch("vllm", MODEL, LaunchSettings(device="cuda")))  # Validate checked a vLLM launch
    assert tab.engine_key() != "vllm"
    with pytest.raises(RuntimeError, match="vLLM is not installed"):  # never a launch of a missing program
        Launch("vllm", MODEL, LaunchSettings(device="cuda")).argv(endpoint=Endpoint("127.0.0.1", 1), python=sys.executable)


def test_the_environments_own_vllm_comes_before_path(tmp_path, vllm_on_path):
    env = install(tmp_path / "env" / "bin")  # a `vllm` beside the interpreter that runs the launch
    python = env.parent / "python"
    assert vllm_command(str(python)) == [str(env), "serve"]
    assert vllm_command("/nowhere/python") == [str(vllm_on_path), "serve"]


def test_vllm_startup_lines_are_followed():
    state = StartupState(engine="vllm")
    prefix = "(EngineCore_DP0 pid=4410) INFO 09-10 18:21:40 "
    for line in ("[gpu_model_runner.py:5089] Model loading took 14.93 GiB memory and 20.123456 seconds",
                 "[gpu_worker.py:773] Available KV cache memory: 61.37 GiB",
                 "[kv_cache_utils.py:1147] GPU KV cache size: 1,340,640 tokens, Maximum concurrency for 262,144 "
                 "tokens per request: 5.11x"):
        assert state.feed(prefix + line)
    assert state.stage == "KV pool allocated" and not state.ready
    assert state.figures == {"weights_gb": 14.93, "weights_seconds": 20.123456, "kv_memory_gb": 61.37,
                             "kv_tokens": 1_340_640, "max_concurrency": 5.11}
    state.feed("(APIServer pid=4000) INFO 09-10 18:22:01 [entry.py:139] Starting vLLM server on http://0.0.0.0:8000")
    assert state.figures["port"] == 8000 and not state.ready
    state.feed("(APIServer pid=4000) INFO:     Application startup complete.")
    assert state.ready
    # SGLang's ready line is not vLLM's, and uvicorn's line does not make SGLang ready (it warms up after it)
    assert not StartupState(engine="vllm").feed("The server is fired up and ready to roll!")
    sglang = StartupState()
    sglang.feed("INFO:     Application startup complete.")
    assert not sglang.ready


@pytest.mark.slow
def test_run_launches_vllm_serve_and_graphs_its_metrics(qtbot, vllm_on_path, no_orphans):
    tab = RunTab()
    qtbot.addWidget(tab)
    tab.ensure_plots()
    assert tab.engine.model().item(tab.engine.findData("vllm")).isEnabled()
    tab.apply_launch(Launch("vllm", MODEL, LaunchSettings(device="cuda", tp=2)))  # what Validate checked
    assert tab.engine_key() == "vllm"
    tab.model_field.setText(MODEL)
    try:
        with qtbot.waitSignal(tab.controller.ready, timeout=20000):
            tab.start()
        argv = tab.controller.process.argv
        port = argv[argv.index("--port") + 1]
        assert argv[:3] == [str(vllm_on_path), "serve", MODEL]
        assert argv[3:] == ["--tensor-parallel-size", "2", "--host", "127.0.0.1", "--port", port]
        assert "Ready" in tab.stage.text()
        assert f"KV pool {KV_TOKENS:,} tokens" in tab.figures.text() and "weights 2.50 GB" in tab.figures.text()

        timing = AnswerTiming()  # a real request through our chat client moves vLLM's counters
        text = "".join(stream_chat(tab.controller.base_url, [{"role": "user", "content": "hello there"}],
                                   model=MODEL, max_tokens=40, timing=timing))
        assert text.startswith(" tok0") and timing.tokens == 40 and timing.tokens_counted_by == "server"
        plots = tab.plots
        qtbot.waitUntil(lambda: all(plots.panel_has_data(p) for p in ("Pool usage", "Requests", "Throughput")),
                        timeout=10000)
        generated = plots.history.values("gen_tok_s")
        assert max(v for v in generated if v == v) > 0  # tokens/s from vllm:generation_tokens_total
        assert max(v for v in plots.history.values("token_usage") if v == v) > 0  # vllm:kv_cache_usage_perc
        assert not plots.panel_has_data("State pool")  # vLLM exports no pool sizes: "no data", not zeros
    finally:
        tab.shutdown()
