"""Prediction and allocation are one code: the engine's pools are what `plan_memory` says, and the
planner reads the weights of the same checkpoint from its safetensors headers."""

from __future__ import annotations

import pytest

from bringup.core.planner import plan_memory

GIB = 1024**3


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from engine_helpers import tiny_nemotron_h

    return tiny_nemotron_h(tmp_path_factory.mktemp("tiny-nemotron"))


def test_engine_allocates_what_the_planner_predicts(checkpoint):
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.sources.resolve import load_layer_map

    engine = Engine(EngineConfig(str(checkpoint), device="cpu", dtype="float32", mem_fraction=None,
                                 max_running_requests=3, page_size=16, context_length=256), log=lambda _line: None)
    plan = engine.plan
    assert plan.target == "embedded" and plan.ok
    stats = engine.stats()  # the requests' pools (decode graphs add a padding page and slot beyond)
    assert stats["kv_tokens_total"] == plan.kv_tokens == 3 * 256
    assert stats["state_slots_total"] == plan.state_slots == 3
    # the same plan again, from the checkpoint on disk instead of the loaded model
    again = plan_memory(load_layer_map(str(checkpoint)), device_memory=plan.device_memory, device="cpu",
                        dtype="float32", kv_dtype="float32", conv_dtype="float32", ssm_dtype="float32",
                        page_size=16, context=256, max_running_requests=3, checkpoint=checkpoint)
    assert again.weights_source == "checkpoint"
    assert (again.kv_bytes_per_token, again.state_bytes_per_request) == (plan.kv_bytes_per_token, plan.state_bytes_per_request)
    assert (again.kv_tokens, again.state_slots) == (plan.kv_tokens, plan.state_slots)
    # the checkpoint's tensors, cast to float32, are exactly the engine's loaded weights
    assert again.weights_bytes == engine.weights_bytes
