"""The prompt tokens per engine step: chosen by the planner from the device and the model, shown in the plan."""

from __future__ import annotations

import pytest

from bringup.core.planner import plan_memory
from bringup.core.planner.step_budget import MAX_TOKENS, MIN_TOKENS, prefill_budget
from bringup.core.sources.resolve import load_layer_map

GIB = 1024**3


def test_a_sparse_model_gets_a_larger_budget_than_a_dense_one_on_an_accelerator():
    nano = load_layer_map("NVIDIA-Nemotron-3-Nano-30B-A3B")
    dense = load_layer_map("meta-llama/Meta-Llama-3.1-8B")
    nano_tokens, why = prefill_budget(nano, device="cuda", weights_bytes=2 * nano.params_total)
    dense_tokens, _ = prefill_budget(dense, device="cuda", weights_bytes=2 * dense.params_total)
    assert nano_tokens == 4096 and "2 weight reads" in why  # 3.6 B of 31.6 B parameters active per token
    assert dense_tokens == MIN_TOKENS < nano_tokens <= MAX_TOKENS
    assert prefill_budget(nano, device="cpu", weights_bytes=2 * nano.params_total)[0] == 2048


def test_the_plan_shows_the_budget_and_the_users_value_wins():
    nano = load_layer_map("NVIDIA-Nemotron-3-Nano-30B-A3B")
    plan = plan_memory(nano, device_memory=140 * GIB, device="cuda", dtype="bfloat16")
    assert plan.chunked_prefill_size == 4096 and plan.to_json()["chunked_prefill_size"] == 4096
    assert plan.assumed["chunked_prefill_size"].startswith("4096 (")
    assert any(n.startswith("prompt tokens per step 4,096") for n in plan.notes)
    mine = plan_memory(nano, device_memory=140 * GIB, device="cuda", dtype="bfloat16", chunked_prefill_size=8192)
    assert mine.chunked_prefill_size == 8192 and "chunked_prefill_size" not in mine.assumed
    from bringup.core.errors import UserError

    with pytest.raises(UserError, match="--chunked-prefill-size must be at least 1"):
        plan_memory(nano, device_memory=140 * GIB, device="cuda", dtype="bfloat16", chunked_prefill_size=0)
