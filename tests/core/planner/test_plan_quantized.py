"""The planner counts a quantized checkpoint's weights at their own bits unless a dtype is given."""

from __future__ import annotations

import json

from bringup.core.families import build_layer_map
from bringup.core.planner.plan import plan_memory

from repo_paths import NANO_CONFIG

FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
       "modules_to_not_convert": ["lm_head", "backbone.embeddings"]}


def test_fp8_checkpoint_weights_are_about_half_of_bf16():
    config = json.loads(NANO_CONFIG.read_text())
    dense = plan_memory(build_layer_map(config), device_memory=80 * 2**30, device="cuda", dtype="auto")
    config["quantization_config"] = FP8
    fp8 = plan_memory(build_layer_map(config), device_memory=80 * 2**30, device="cuda", dtype="auto")
    assert 0.5 < fp8.weights_bytes / dense.weights_bytes < 0.56
    assert any("fp8" in n for n in fp8.notes)
    # --dtype bfloat16 dequantises: the weights are the bf16 ones again, and so are the pools.
    again = plan_memory(build_layer_map(config), device_memory=80 * 2**30, device="cuda", dtype="bfloat16")
    assert again.weights_bytes == dense.weights_bytes
    assert fp8.kv_tokens > dense.kv_tokens


def test_an_unreadable_quantization_table_is_planned_in_the_model_dtype_with_a_note():
    # found by the config fuzz: a table without quant_method maps (with a note) but made the plan raise
    config = json.loads(NANO_CONFIG.read_text())
    dense = plan_memory(build_layer_map(config), device_memory=80 * 2**30, device="cuda", dtype="auto")
    config["quantization_config"] = {k: v for k, v in FP8.items() if k != "quant_method"}
    plan = plan_memory(build_layer_map(config), device_memory=80 * 2**30, device="cuda", dtype="auto")
    assert plan.weights_bytes == dense.weights_bytes
    assert any("model dtype" in n and "quant_method" in n for n in plan.notes)
    for target in ("sglang", "vllm"):
        plan_memory(build_layer_map(config), device_memory=80 * 2**30, device="cuda", dtype="auto", target=target)
