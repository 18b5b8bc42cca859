"""The Plan tab on real configs: figures from the planner, what-if controls re-plan at once."""

from __future__ import annotations

import pytest

from bringup.app.tabs.plan_tab import PlanTab
from bringup.app.tabs.plan_widgets import GIB
from bringup.core.planner import plan_memory
from tabs_helpers import LFM2, NEMOTRON_NANO, layer_map


def _has_sglang_planner() -> bool:
    import importlib.util

    return importlib.util.find_spec("bringup.core.planner.sglang") is not None


@pytest.fixture
def tab(qtbot):
    tab = PlanTab()
    qtbot.addWidget(tab)
    tab.resize(1200, 600)
    tab.set_layer_map(layer_map(NEMOTRON_NANO))
    return tab


def test_plan_matches_the_planner(tab):
    expected = plan_memory(layer_map(NEMOTRON_NANO), **tab.settings()).to_json()
    assert tab.plan.to_json()["kv_tokens"] == expected["kv_tokens"]
    # Hand-checked figures of the issue: 6,144 B of KV per token, 46.8 MiB of state per request.
    assert tab.plan.kv_bytes_per_token == 6144
    assert "6 KiB per token" in tab.cards["kv_tokens"].note.text()
    assert "46.8 MiB per request" in tab.cards["state_slots"].note.text()
    # The bar is the plan's own breakdown and fills the device exactly.
    assert sum(s.bytes for s in tab.bar.segments) == pytest.approx(tab.settings()["device_memory"], rel=1e-6)
    assert [s.label for s in tab.bar.segments][:3] == ["Weights", "KV pool", "State pool"]
    assert not tab.grab().isNull()  # the bar and the cards paint


def test_what_if_controls_replan_at_once(tab, qtbot):
    tab.ssm_dtype.setCurrentText("bfloat16")
    qtbot.waitUntil(lambda: "23.8 MiB per request" in tab.cards["state_slots"].note.text(), timeout=2000)
    assert not tab.tp.isEnabled()  # the embedded engine runs on one device
    tab.context.setValue(32768)
    qtbot.waitUntil(lambda: tab.plan.context == 32768, timeout=2000)
    assert "32,768-token context" in tab.cards["max_running_requests"].note.text()


@pytest.mark.skipif(not _has_sglang_planner(), reason="the SGLang planner has not landed")
def test_tp_splits_the_kv_heads_for_sglang(tab, qtbot):
    tab.target.setCurrentText("sglang==0.5.23")
    assert tab.tp.isEnabled()
    tab.tp.setValue(2)
    qtbot.waitUntil(lambda: tab.plan is not None and tab.plan.tp == 2, timeout=2000)
    assert tab.plan.kv_bytes_per_token == 3072  # 2 KV heads split over 2 ranks
    assert "3 KiB per token" in tab.cards["kv_tokens"].note.text()


def test_mem_fraction_and_device_memory(tab, qtbot):
    before = tab.plan.kv_tokens + tab.plan.state_slots
    tab.auto_fraction.setChecked(False)
    tab.fraction.setValue(0.6)
    qtbot.waitUntil(lambda: tab.plan.mem_fraction == pytest.approx(0.6), timeout=2000)
    tab.memory.setValue(24.0)  # a 24 GB card cannot hold 59 GiB of weights
    qtbot.waitUntil(lambda: tab.plan.device_memory == 24 * GIB, timeout=2000)
    assert tab.preset.currentText() == "Custom"
    assert not tab.plan.ok
    assert "does not fit" in tab.bar.title
    assert tab.error  # the plan's problem is shown in red
    assert tab.plan.kv_tokens + tab.plan.state_slots < before


def test_all_attention_comparison_shows_why_a_hybrid_matters(tab):
    assert "all 29 mixer layers attention" in tab.compare.text()  # 6 attention + 23 Mamba2; MoE layers hold no cache
    text = tab.compare_text.text()
    ratio = tab.plan.all_attention.kv_bytes_per_token / tab.plan.kv_bytes_per_token
    assert f"{ratio:.1f}\u00d7" in text


def test_another_model_and_no_model(tab, qtbot):
    tab.set_layer_map(layer_map(LFM2))  # short-conv hybrid: 8 attention, 22 conv layers
    assert tab.plan.model == layer_map(LFM2).name
    assert (tab.plan.kv_layers, tab.plan.state_layers) == (8, 22)
    assert "all 30 mixer layers attention" in tab.compare.text()
    tab.set_layer_map(None)
    assert tab.plan is None
    assert tab.bar.segments == []


def test_weights_come_from_a_local_checkpoint_s_headers(qtbot, tmp_path):
    import json
    import struct

    from bringup.core.sources.resolve import load_layer_map

    (tmp_path / "config.json").write_text(NEMOTRON_NANO.read_text())
    header = json.dumps({"w": {"dtype": "BF16", "shape": [1000, 1000], "data_offsets": [0, 2_000_000]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)  # headers are all it reads
    tab = PlanTab()
    qtbot.addWidget(tab)
    tab.set_layer_map(load_layer_map(str(tmp_path)))
    assert tab.plan.weights_source == "checkpoint"
    assert tab.plan.weights_bytes == 2_000_000
    assert tab.bar.segments[0].note == "from the checkpoint"


def test_sglang_strategy_sets_the_state_slots_each_request_holds(tab, qtbot):
    tab.target.setCurrentText("sglang==0.5.23")
    tab.device.setCurrentText("cuda")
    tab.strategy.setCurrentText("extra_buffer")
    qtbot.waitUntil(lambda: tab.plan is not None and tab.plan.strategy == "extra_buffer", timeout=2000)
    assert tab.plan.state_slots_per_request == 5  # extra_buffer with the overlap schedule
    assert "5 state slots each (extra_buffer)" in tab.cards["max_running_requests"].note.text()
    tab.disable_radix.setChecked(True)
    qtbot.waitUntil(lambda: tab.plan.state_slots_per_request == 1, timeout=2000)


def test_pipeline_stages_table_and_a_stage_on_the_map(tab, qtbot):
    tab.target.setCurrentText("sglang==0.5.23")
    tab.pp.setValue(8)
    qtbot.waitUntil(lambda: tab.plan is not None and tab.plan.pp == 8, timeout=2000)
    assert not tab.stage_box.isHidden() and tab.stage_table.rowCount() == 8
    texts = [tab.stage_table.item(r, 5).text() for r in range(8)]
    assert "no KV layer" in texts  # Nemotron-3-Nano split 8 ways: a stage without attention layers
    with qtbot.waitSignal(tab.highlight_requested) as blocker:
        tab.stage_table.selectRow(0)
    stage0 = tab.plan.stages[0]
    assert blocker.args[0].related == list(range(stage0.layers[0], stage0.layers[1] + 1))
    assert blocker.args[0].requested == [] and blocker.args[0].severity == "info"
    tab.pp.setValue(1)
    qtbot.waitUntil(lambda: tab.plan.pp == 1, timeout=2000)
    assert tab.stage_box.isHidden()


def test_this_machine_is_measured_by_the_probe_off_the_gui_thread(tab, qtbot, monkeypatch):
    import psutil

    # The probe child crashes at its torch step (as torch.xpu can): no GPU found, so the plan is
    # for this machine's host memory; the crash costs nothing but a finding.
    monkeypatch.setenv("BRINGUP_PROBE_SIMULATE", "crash:torch")
    tab.preset.setCurrentIndex(0)
    assert "measuring" in tab.preset.currentText()
    qtbot.waitUntil(lambda: tab.preset.currentText().startswith("This machine \u00b7 cpu"), timeout=30000)
    assert tab.device.currentText() == "cpu"
    assert tab.plan.device_memory == pytest.approx(psutil.virtual_memory().available, rel=0.2)


def test_a_damaged_checkpoint_falls_back_to_the_parameter_count_and_says_so(qtbot, tmp_path):
    from bringup.core.sources.resolve import load_layer_map

    (tmp_path / "config.json").write_text(NEMOTRON_NANO.read_text())
    (tmp_path / "model.safetensors").write_bytes(b"\x01")  # truncated
    tab = PlanTab()
    qtbot.addWidget(tab)
    tab.set_layer_map(load_layer_map(str(tmp_path)))
    assert tab.plan.weights_source == "params"
    assert "weights from the parameter count" in tab.message.text() and "safetensors" in tab.message.text()


def test_sglang_defaults_shown_and_the_users_values_win(tab, qtbot):
    tab.target.setCurrentText("sglang==0.5.20")
    tab.device.setCurrentText("cuda")
    tab.preset.setCurrentIndex(tab.preset.count() - 1)  # Custom
    tab.memory.setValue(24)
    qtbot.waitUntil(lambda: tab.plan is not None and tab.plan.device_memory == 24 * 1024**3, timeout=2000)
    assert tab.plan.assumed["chunked_prefill_size"].startswith("4096 ")  # 0.5.20: 4096 for 20-35 GB devices
    assert "chunked_prefill_size = 4096 (sglang 0.5.20 default for devices below 35 GB)" in tab.assumed.text()
    auto = tab.plan.mem_fraction
    tab.chunked_prefill.setValue(16384)
    tab.graph_max_bs.setValue(8)
    qtbot.waitUntil(lambda: "chunked_prefill_size" not in tab.plan.assumed and "cuda_graph_max_bs" not in tab.plan.assumed,
                    timeout=2000)
    assert tab.plan.mem_fraction < auto  # a larger chunk reserves more activation memory
    tab.target.setCurrentText("embedded")
    assert not tab.chunked_prefill.isEnabled() and not tab.graph_max_bs.isEnabled()


def test_vllm_target_plans_with_vllms_formulas(tab, qtbot):
    tab.target.setCurrentText("vllm==0.33.0")
    assert tab.tp.isEnabled() and not tab.strategy.isEnabled() and tab.disable_radix.isEnabled()
    qtbot.waitUntil(lambda: tab.plan is not None and tab.plan.target == "vllm==0.33.0", timeout=2000)
    expected = plan_memory(layer_map(NEMOTRON_NANO), **tab.settings())
    assert tab.plan.to_json()["state_slots"] == expected.state_slots and tab.plan.mem_fraction == 0.92
    assert tab.plan.state_slots_per_request == 8  # 4 Mamba groups x 2 blocks (mamba_cache_mode align)
    tab.disable_radix.setChecked(True)
    qtbot.waitUntil(lambda: tab.plan.strategy == "none", timeout=2000)
    assert tab.plan.state_slots_per_request == 4


def test_weights_that_do_not_fit_overflow_the_device_edge_with_a_tp_that_would(tab, qtbot):
    tab.target.setCurrentText("sglang==0.5.23")
    b60 = next(i for i in range(tab.preset.count()) if "B60" in tab.preset.itemText(i))
    tab.preset.setCurrentIndex(b60)  # 24 GiB for Nemotron-3-Nano's 58.8 GiB of weights
    qtbot.waitUntil(lambda: tab.plan is not None and tab.plan.device_memory == 24 * GIB, timeout=2000)
    assert not tab.plan.ok and tab.bar.overflow
    assert tab.bar.total > tab.bar.device_bytes == 24 * GIB  # scaled to the need, the device's edge inside
    assert "Weights  58.8 GiB  (245% of the device)" in tab.bar._legend(2000)[0][0]
    # The smallest TP the target's rules accept (3 does not divide the heads) that the plan fits.
    assert tab.advice.tp == 4 and "--tp 4 (4 \u00d7 Intel Arc Pro B60)" in tab.message.text()
    assert not tab.bar.grab().isNull()
