"""The prompt tokens per engine step: chosen by the planner from the device and the model, shown in the plan."""

from __future__ import annotations

import pytest

from bringup.core.planner import plan_memory
from bringup.core.planner.render import render_text
from bringup.core.planner.step_budget import MAX_TOKENS, MIN_TOKENS, MIXED_MIN_TOKENS, mixed_budget, prefill_budget
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


def test_a_step_beside_decodes_gets_the_tokens_of_one_weight_read(nano_layer_map):
    """Nano-30B bf16 (the shared config): 1,764 tokens of compute per weight read -> 2,048, half its chunk."""
    weights = 2 * nano_layer_map.params_total
    tokens, why = mixed_budget(nano_layer_map, device="cuda", weights_bytes=weights, chunk=4096)
    assert tokens == 2048 and "1 weight read" in why and "1,764 -> 2,048" in why
    assert mixed_budget(nano_layer_map, device="cuda", weights_bytes=weights, chunk=1536)[0] == 1536  # at most the chunk
    dense = load_layer_map("meta-llama/Meta-Llama-3.1-8B")  # 200 tokens per read: the floor
    assert mixed_budget(dense, device="cuda", weights_bytes=2 * dense.params_total, chunk=2048)[0] == MIXED_MIN_TOKENS
    assert mixed_budget(nano_layer_map, device="cpu", weights_bytes=weights, chunk=2048) == (
        2048, "the CPU's steps are host-bound: the whole chunk")


def test_the_plan_shows_the_mixed_budget_and_the_users_value_wins(nano_layer_map):
    plan = plan_memory(nano_layer_map, device_memory=140 * GIB, device="cuda", dtype="bfloat16")
    assert (plan.chunked_prefill_size, plan.mixed_prefill_size) == (4096, 2048)
    assert plan.to_json()["mixed_prefill_size"] == 2048 and plan.assumed["mixed_prefill_size"].startswith("2048 (")
    assert any(n.startswith("prompt tokens per step 2,048 beside the decode rows") for n in plan.notes)
    assert "mixed_prefill_size = 2048 (" in render_text(plan)
    cpu = plan_memory(nano_layer_map, device_memory=64 * GIB, device="cpu", dtype="bfloat16")
    assert cpu.mixed_prefill_size == cpu.chunked_prefill_size == 2048
    small_chunk = plan_memory(nano_layer_map, device_memory=140 * GIB, device="cuda", dtype="bfloat16",
                              chunked_prefill_size=1024)
    assert small_chunk.mixed_prefill_size == 1024  # the planner's 2,048 capped at the user's chunk
    mine = plan_memory(nano_layer_map, device_memory=140 * GIB, device="cuda", dtype="bfloat16", mixed_prefill_size=512)
    assert mine.mixed_prefill_size == 512 and "mixed_prefill_size" not in mine.assumed
    over = plan_memory(nano_layer_map, device_memory=140 * GIB, device="cuda", dtype="bfloat16", mixed_prefill_size=9000)
    assert over.mixed_prefill_size == 4096 and any("capped at the chunk" in n for n in over.notes)
    from bringup.core.errors import UserError

    with pytest.raises(UserError, match="--mixed-prefill-size must be at least 1"):
        plan_memory(nano_layer_map, device_memory=140 * GIB, device="cuda", dtype="bfloat16", mixed_prefill_size=0)
    with pytest.raises(UserError, match="embedded engine's"):
        plan_memory(nano_layer_map, device_memory=140 * GIB, target="sglang==0.5.23", device="cuda",
                    dtype="bfloat16", mixed_prefill_size=1024)
