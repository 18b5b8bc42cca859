"""The window follows what runs (issue 33): the served model from /server_info names the chat,
marks the map when it shows another model, and decides which pool graphs are there."""

from __future__ import annotations

import pytest

from bringup.app.run.chat_panel import ChatPanel
from bringup.core.client.running_label import ServedModel
from repo_paths import SHARED_MODELS

NANO = SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"
# /server_info as our engine writes it (core/engine/engine.py server_info), for two real models.
MINIATURE = {"model": "nemotron-3-nano-pattern-tiny-v1", "architecture": "NemotronHForCausalLM", "load_format": "auto",
             "params": 22_209_704, "dtype": "float32", "device": "cpu", "device_name": "x86_64",
             "kv_layers": [5, 12], "state_layers": [0, 2, 4], "model_path": "/cache/nemotron-3-nano-pattern-tiny-v1"}
SMOLLM2 = {"model": "SmolLM2-135M-Instruct.Q4_1", "architecture": "LlamaForCausalLM", "load_format": "auto",
           "params": 134_515_008, "dtype": "float32", "device": "cpu", "device_name": "x86_64",
           "kv_layers": list(range(30)), "state_layers": [], "model_path": "/cache/gguf/SmolLM2-135M-Instruct.Q4_1.gguf"}


def test_served_model_in_words():
    tiny = ServedModel.from_info(MINIATURE, "http://127.0.0.1:30001")
    assert tiny.random_weights and "noise" in tiny.weights and tiny.map_source == "default"
    assert tiny.device_name == "the CPU (x86_64)"
    smol = ServedModel.from_info(SMOLLM2)
    assert not smol.random_weights and smol.weights == "checkpoint weights" and smol.state_layers == ()
    assert ServedModel.from_info({"device": "cuda:0", "device_name": "NVIDIA H200"}).device_name == "NVIDIA H200"
    assert ServedModel.from_info({"device": "xpu:0"}).device_name == "Intel XPU (xpu:0)"


def test_chat_names_its_model_and_starts_over_for_another(qtbot):
    chat = ChatPanel()
    qtbot.addWidget(chat)
    chat.set_server("http://127.0.0.1:30001")
    chat.set_model(ServedModel.from_info(MINIATURE, "http://127.0.0.1:30001"))
    assert "nemotron-3-nano-pattern-tiny-v1" in chat.who.text() and "Random weights" in chat.who.text()
    chat.messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "noise"}]
    chat.set_model(ServedModel.from_info(MINIATURE, "http://127.0.0.1:30001"))  # the same model again: kept
    assert len(chat.messages) == 2
    chat.set_model(ServedModel.from_info(SMOLLM2, "http://127.0.0.1:30001"))
    assert chat.messages == [] and "SmolLM2" in chat.who.text() and "Random weights" not in chat.who.text()
    assert "was not sent to it" in chat.transcript.toPlainText()
    chat.messages = [{"role": "user", "content": "hi"}]
    chat.new_button.click()
    assert chat.messages == [] and chat.transcript.toPlainText() == ""


def test_the_map_says_when_it_is_not_the_running_model_and_switches(qtbot, monkeypatch):
    from bringup.app import tabs as tab_registry
    from bringup.app.main_window import MainWindow

    monkeypatch.setattr(tab_registry, "TAB_FACTORIES", [])
    window = MainWindow()
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.settled, timeout=10000):
        window.load(str(NANO))
    window.show_running(ServedModel.from_info(MINIATURE))
    assert window.running.isVisibleTo(window) and window.running.mismatch
    assert "The map is not the running model" in window.running.text.text()
    assert "running: nemotron-3-nano-pattern-tiny-v1" in window.windowTitle()
    with qtbot.waitSignal(window.settled, timeout=10000):
        window.running.switch.click()  # one click: the running model's map
    assert window.layer_map.source == "default" and not window.running.mismatch
    window.show_running(None)
    assert not window.running.isVisibleTo(window)


def test_no_state_pool_graph_for_a_model_without_recurrent_layers(qtbot):
    pytest.importorskip("pyqtgraph")
    from bringup.app.run.live_plots import LivePlots

    plots = LivePlots()
    qtbot.addWidget(plots)
    plots.set_served(ServedModel.from_info(SMOLLM2))
    assert not plots.panel_visible("State pool") and plots.panel_visible("KV pool")
    plots.set_served(ServedModel.from_info(MINIATURE))
    assert plots.panel_visible("State pool")


def test_the_demo_is_built_from_what_runs(qtbot):
    from bringup.app.demo import DemoWindow, profile_for

    served = ServedModel.from_info(MINIATURE, "http://127.0.0.1:9")
    profile = profile_for(served)
    assert profile.title == "nemotron-3-nano-pattern-tiny-v1 on the CPU (x86_64)"
    assert profile.layer_map_source == "default" and profile.prompts  # the miniature's map and its pinned prompts
    demo = DemoWindow(profile, attach_url="http://127.0.0.1:9")  # nothing listens: the attach is refused
    qtbot.addWidget(demo)
    demo._on_info(MINIATURE)
    assert demo.noise.isVisibleTo(demo) and "noise" in demo.noise.text()
    assert demo.title.text().endswith("on the CPU (x86_64)") and "model: nemotron-3-nano-pattern-tiny-v1" in demo.sub.text()
    demo._on_info(SMOLLM2)
    assert not demo.noise.isVisibleTo(demo) and demo.state_gauge.title == "State pool (no recurrent layers)"
    demo.close()


def test_the_stakeholder_demo_is_real_weights_once_they_are_fetched(tmp_path, monkeypatch):
    from bringup.app.demo import bundled_profile_for, stakeholder_profile as load_profile
    from bringup.core.sources.packaged import find_package, target_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert load_profile().model == "default"  # nothing fetched: the miniature's pattern demo
    package = find_package("smollm2")
    gguf = target_path(package)
    gguf.parent.mkdir(parents=True)
    with open(gguf, "wb") as fh:  # a file of the recipe's size is what cached_path accepts as fetched
        fh.truncate(package.bytes)
    assert load_profile().model == "smollm2"
    assert bundled_profile_for(str(gguf)).model == "smollm2" and bundled_profile_for("default").model == "default"
    assert bundled_profile_for("/somewhere/else") is None


def test_stop_then_start_of_another_model_starts_a_new_chat(qtbot):
    chat = ChatPanel()
    qtbot.addWidget(chat)
    chat.set_server("http://127.0.0.1:30001")
    chat.set_model(ServedModel.from_info(MINIATURE, "http://127.0.0.1:30001"))
    chat.messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "noise"}]
    chat.set_server(None)  # Stop
    chat.set_model(None)
    chat.set_server("http://127.0.0.1:30002")  # Start of SmolLM2 on another port
    chat.set_model(ServedModel.from_info(SMOLLM2, "http://127.0.0.1:30002"))
    assert chat.messages == [] and "was not sent to it" in chat.transcript.toPlainText()


def test_dummy_weights_larger_than_this_machine_are_refused_before_the_engine_starts(qtbot):
    from bringup.app.tabs.run_tab import RunTab
    from bringup.core.sources.resolve import load_layer_map

    tab = RunTab()
    qtbot.addWidget(tab)
    nano = load_layer_map(str(NANO))  # 31.6 B parameters: 58.8 GiB of bf16 weights
    tab.set_layer_map(nano)
    tab.model_field.setText(nano.source)
    tab.weights.setCurrentText("dummy")
    tab.device.setCurrentText("cpu")
    tab.start()
    assert tab.controller.state == "idle" and tab.controller.process is None  # nothing was launched
    assert "needs 58.82 GiB for its weights alone" in tab.reason.text() and "'default'" in tab.reason.text()
