"""The layer map the engine plans with: from the families, checked against the model's cache spec,
or built from the spec when no family knows the model."""

import json
from pathlib import Path

import pytest

from bringup.core.engine.models.base import CacheSpec
from bringup.core.engine.sizing import engine_layer_map, layer_map_from_spec
from bringup.core.errors import UserError
from bringup.core.planner import plan_memory

MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
NANO = json.loads((MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json").read_text())
NANO_SPEC = CacheSpec(kv_layer_ids=(5, 12, 19, 26, 33, 42), num_kv_heads=2, head_dim=128,
                      state_layer_ids=(0, 2, 4, 7, 9, 11, 14, 16, 18, 21, 23, 25, 28, 30, 32, 35, 37, 39, 41, 44, 46,
                                       48, 50),
                      conv_shape=(6144, 3), ssm_shape=(64, 64, 128))


def test_family_map_agrees_with_model_spec():
    lines = []
    layer_map = engine_layer_map(NANO, NANO_SPEC, name="nano", source="", params=0, log=lines.append)
    assert layer_map.kv_layers == [5, 12, 19, 26, 33, 42] and not lines


def test_disagreement_is_a_clear_error():
    wrong = CacheSpec(kv_layer_ids=(0, 5), num_kv_heads=2, head_dim=128, state_layer_ids=NANO_SPEC.state_layer_ids,
                      conv_shape=(6144, 3), ssm_shape=(64, 64, 128))
    with pytest.raises(UserError, match=r"disagree on the caches: layer map KV layers \[5, 12, 19, 26, 33, 42\]"):
        engine_layer_map(NANO, wrong, name="nano", source="", params=0, log=print)


def test_unknown_family_plans_from_the_spec_with_the_same_bytes():
    config = dict(NANO, model_type="my_hybrid", architectures=["MyHybridForCausalLM"])
    config.pop("hybrid_override_pattern", None)
    config.pop("layers_block_type", None)
    lines = []
    from_spec = engine_layer_map(config, NANO_SPEC, name="x", source="", params=10**9, log=lines.append)
    assert lines and "sizing from the model's own cache layout" in lines[0]
    assert from_spec.kv_layers == list(NANO_SPEC.kv_layer_ids)
    assert from_spec.state_layers == list(NANO_SPEC.state_layer_ids)
    family = engine_layer_map(NANO, NANO_SPEC, name="nano", source="", params=0, log=print)
    kwargs = dict(device_memory=80 * 2**30, device="cuda", weights_bytes=60 * 2**30, dtype="bfloat16")
    a, b = plan_memory(from_spec, **kwargs), plan_memory(family, **kwargs)
    assert (a.kv_bytes_per_token, a.state_bytes_per_request) == (b.kv_bytes_per_token, b.state_bytes_per_request)
    assert a.kv_bytes_per_token == 6 * 2 * 2 * 128 * 2  # 6 layers, K+V, 2 heads, 128 dims, bf16


def test_spec_map_of_a_dense_model():
    spec = CacheSpec(kv_layer_ids=(0, 1, 2), num_kv_heads=2, head_dim=16)
    layer_map = layer_map_from_spec({"num_hidden_layers": 3}, spec, name="d", params=5)
    assert [l.mixer for l in layer_map.layers] == ["attention"] * 3 and layer_map.state_layers == []
    assert layer_map.family is None
