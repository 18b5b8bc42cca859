"""Layer-index findings read against a model's layer map."""

from __future__ import annotations

from bringup.core.diagnosis import diagnose
from diagnose_helpers import diagnose_file
from plan_helpers import nano_map

NANO_STATE_LAYERS = [0, 2, 4, 7, 9, 11, 14, 16, 18, 21, 23, 25, 28, 30, 32, 35, 37, 39, 41, 44, 46, 48, 50]


def test_nano_layer_0_is_mamba_and_the_valid_ones_attention():
    f = diagnose_file("sglang-0.5.17-xpu-triton-layer0.log", nano_map()).findings[0]
    assert (f.requested.index, f.requested.mixer, f.requested.ffn) == (0, "mamba2", "none")
    assert [v.index for v in f.valid] == [5, 12, 19, 26, 33, 42]
    assert {v.mixer for v in f.valid} == {"attention"}
    assert "layer 0 is a mamba2 layer" in f.explanation and "Note:" not in f.explanation
    data = f.to_json()
    assert data["requested"] == {"index": 0, "mixer": "mamba2", "ffn": "none"}
    assert len(data["valid"]) == 6


def test_an_ffn_only_block_is_named_as_such():
    log = "ValueError: layer_id=1 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])"
    f = diagnose(log, nano_map()).findings[0]
    assert (f.requested.mixer, f.requested.ffn) == ("none", "moe")
    assert "FFN-only (moe) block" in f.explanation


def test_engine_state_pool_asked_for_an_attention_layer():
    log = f"PoolLayerError: layer 5 is not in the state pool; it holds layers {NANO_STATE_LAYERS}"
    f = diagnose(log, nano_map()).findings[0]
    assert f.requested.mixer == "attention"
    assert {v.mixer for v in f.valid} == {"mamba2"}
    assert "Note:" not in f.explanation  # the list is exactly Nano's state layers


def test_log_from_another_model_is_pointed_out():
    f = diagnose_file("sglang-rocm-wave-granite.log", nano_map()).findings[0]
    assert "[5, 12, 19, 26, 33, 42], not the log's list" in f.explanation
    assert [v.index for v in f.valid] == [10, 13, 17, 27]


def test_layer_beyond_the_model():
    log = "ValueError: layer_id=60 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])"
    f = diagnose(log, nano_map()).findings[0]
    assert f.requested is None and f.requested_layer == 60
    assert "has only 52 layers" in f.explanation


def test_without_a_model_the_ids_are_still_there():
    f = diagnose_file("bringup-engine-pool-layer.log").findings[0]
    assert f.requested is None and f.valid == ()
    assert "requested" not in f.to_json() and f.to_json()["valid_layers"] == [5, 12, 19, 26, 33, 42]
