"""TP divisibility of heads, KV heads, mamba heads and groups; PP stages without attention."""

from __future__ import annotations

from rules_helpers import NANO, QWEN3_NEXT, codes, finding, layer_map, run

from bringup.core.rules import LaunchSettings

from bringup.core.validate import validate


def test_tp3_on_nano_breaks_every_head_count():
    r = run(NANO, "sglang==0.5.23", device="cuda", tp=3, disable_radix_cache=True)
    assert codes(r, "error") == ["TP_ATTENTION_HEADS", "TP_KV_HEADS", "TP_MAMBA_HEADS"]
    assert "32 attention heads" in finding(r, "TP_ATTENTION_HEADS").message
    assert "2 KV heads" in finding(r, "TP_KV_HEADS").message
    mamba = finding(r, "TP_MAMBA_HEADS")
    assert mamba.engine_message == "AssertionError: 64 is not divisible by 3"
    assert list(mamba.layers) == layer_map(NANO).state_layers
    padded = finding(r, "TP_MAMBA_GROUPS_PADDED")  # 8 groups over 3 ranks: padded to 9
    assert padded.severity == "info" and "to 9" in padded.message


def test_tp4_on_nano_replicates_kv_heads_and_passes():
    r = run(NANO, "sglang==0.5.23", device="cuda", tp=4)
    assert r.ok
    assert "replicated on 2 ranks" in finding(r, "TP_KV_REPLICATED").message


def test_tp_on_gdn_uses_linear_attention_heads():
    cfg = layer_map(QWEN3_NEXT).config
    heads = cfg["linear_num_value_heads"]
    r = run(QWEN3_NEXT, "sglang==0.5.23", device="cuda", tp=5)
    assert finding(r, "TP_MAMBA_HEADS").engine_message == f"AssertionError: {heads} is not divisible by 5"


def test_pp_stages_without_attention_on_nano():
    # 52 layers over 8 stages: 6,6,6,6,7,7,7,7 -> [0,6) [6,12) [12,18) [18,24) [24,31) [31,38) [38,45) [45,52);
    # attention at 5, 12, 19, 26, 33, 42 leaves stages 1 and 7 without any.
    r = validate(layer_map(NANO), "sglang==0.5.23", LaunchSettings(device="cuda", pp=8))
    empty = [f for f in r.findings if f.code == "PP_STAGE_WITHOUT_ATTENTION"]
    assert [f.message.split(" (")[0] for f in empty] == ["PP stage 1", "PP stage 7"]
    assert list(empty[0].layers) == list(range(6, 12)) and list(empty[1].layers) == list(range(45, 52))
    assert r.ok and r.command.endswith("--pp-size 8")


def test_pp_layer_map_built_for_the_same_pp_agrees():
    a = validate(layer_map(NANO, 8), "sglang==0.5.23", LaunchSettings(device="cuda", pp=8))
    b = validate(layer_map(NANO), "sglang==0.5.23", LaunchSettings(device="cuda", pp=8))
    assert [f.to_json() for f in a.findings] == [f.to_json() for f in b.findings]


def test_layer0_probe_uses_stage0_attention_layers_under_pp():
    # pp 2: stage 0 is [0, 26): its pool holds 5, 12, 19 only.
    r = run(NANO, "sglang==0.5.17", device="xpu", pp=2, disable_radix_cache=True)
    assert finding(r, "TRITON_LAYER0_PROBE").engine_message == \
        "ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12, 19])"


def test_pp_switches_overlap_off_which_lazy_needs():
    r = run(NANO, "sglang==0.5.23", device="cuda", pp=2)
    assert finding(r, "PP_DISABLES_OVERLAP").engine_message == "Pipeline parallelism is incompatible with overlap schedule."
    assert not r.resolved.overlap_schedule
    assert r.resolved.mamba_strategy == "extra_buffer" and r.resolved.state_slots_per_request == 4
    lazy = run(NANO, "sglang==0.5.23", device="cuda", pp=2, mamba_strategy="extra_buffer_lazy")
    assert "--pp-size > 1 switched it off" in finding(lazy, "LAZY_NEEDS_OVERLAP").message
