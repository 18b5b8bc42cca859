"""`bringup plan --target vllm==X`: vLLM's own sizing (core/planner/vllm.py), where it differs from SGLang's:
one block pool whose page is the aligned attention page, groups of layers per block, Mamba blocks per
request by mamba_cache_mode, max_num_seqs against the Mamba blocks, gpu_memory_utilization. The figures
are checked against the rules in their arithmetic form, and Validate's memory findings are this plan."""

from __future__ import annotations

import json
from math import ceil

import pytest

from bringup.cli import main
from bringup.core.errors import UserError
from bringup.core.planner import plan_memory
from bringup.core.planner.device_presets import preset
from bringup.core.layermap.sizes import parse_size
from bringup.core.rules import LaunchSettings
from bringup.core.validate import validate
from bringup.core.sources.resolve import load_layer_map

GIB = 1024**3


@pytest.fixture(scope="module")
def qwen_next(shared_models):
    return load_layer_map(str(shared_models / "Qwen__Qwen3-Next-80B-A3B-Instruct.json"))


def _plan(lm, memory, **kw):
    return plan_memory(lm, device_memory=parse_size(memory), target=kw.pop("target", "vllm==0.33.0"),
                       device=kw.pop("device", "cuda"), dtype="auto", ssm_dtype=None, **kw)


def test_one_pool_of_aligned_pages(nano_layer_map):
    plan = _plan(nano_layer_map, "72GiB")
    attn_token = plan.kv_bytes_per_token // plan.kv_layers  # one attention layer, one token
    mamba_state = plan.state_bytes_per_request // plan.state_layers  # one Mamba layer's state
    block = plan.page_size
    # the smallest multiple of 16 tokens whose attention page holds one Mamba state (interface.py:1095-1138)
    assert block % 16 == 0 and block * attn_token >= mamba_state > (block - 16) * attn_token
    # 6 attention and 23 Mamba layers: groups of 6, one attention group and 4 Mamba groups (one padded)
    page = block * attn_token
    requested = ceil(72 * GIB * 0.92)
    blocks = (requested - plan.weights_bytes) // (page * 6)
    assert plan.mem_fraction == 0.92 and plan.state_slots == blocks > 0
    assert plan.strategy == "align" and plan.state_slots_per_request == 4 * 2  # 2 blocks per Mamba group in align
    assert plan.max_running_requests == blocks // (1 + 8) and plan.bottleneck == "state"
    max_len = nano_layer_map.config["max_position_embeddings"]
    assert plan.kv_tokens == int(blocks / (-(-max_len // block) + 8) * max_len)  # vLLM's "KV cache size"
    assert any("max_num_seqs 1024 is above the" in p and f"--max-num-seqs {blocks}" in p for p in plan.problems)
    assert "max_num_seqs" in plan.assumed and "vllm/engine/arg_utils.py" in plan.assumed["max_num_seqs"]

    off = _plan(nano_layer_map, "72GiB", disable_radix_cache=True)  # mamba_cache_mode none: one block per group
    assert off.strategy == "none" and off.state_slots_per_request == 4
    assert off.max_running_requests == off.state_slots // (1 + 4)


def test_validate_reports_this_plan(nano_layer_map):
    result = validate(nano_layer_map, "vllm==0.33.0", LaunchSettings(device="cuda"), device_memory=parse_size("72GiB"))
    plan = _plan(nano_layer_map, "72GiB")
    (f,) = [f for f in result.findings if f.code == "VLLM_MAX_SEQS_ABOVE_MAMBA_BLOCKS"]
    assert f.fix.startswith(f"pass --max-num-seqs {plan.state_slots} ")
    assert result.plan is not None and result.plan.to_json() == plan.to_json()
    assert result.resolved.page_size == plan.page_size  # what Validate resolves is what the plan sizes


def test_max_num_seqs_within_the_blocks_fits(nano_layer_map):
    plan = _plan(nano_layer_map, "72GiB", max_running_requests=256)
    assert plan.ok and plan.max_running_requests == min(256, plan.state_slots // 9)
    roomy = _plan(nano_layer_map, "139.8GiB")  # blocks above max_num_seqs: graphs capture; the state still caps
    assert roomy.ok and roomy.state_slots >= 1024 and roomy.max_running_requests == roomy.state_slots // 9 < 1024
    assert roomy.bottleneck == "state"


def test_xpu_qwen3_next(qwen_next):
    small = _plan(qwen_next, "64GiB", device="xpu")
    assert not small.ok and small.bottleneck == "weights" and small.max_running_requests == 0
    assert "No available memory for the cache blocks" in small.problems[0]
    sharded = plan_memory(qwen_next, device_memory=preset("max1550").memory_bytes, target="vllm==0.33.0",
                          device="xpu", tp=4, dtype="auto", ssm_dtype=None)
    assert sharded.ok and sharded.max_running_requests > 0
    tp2 = _plan(qwen_next, "139.8GiB", device="xpu", tp=2)
    assert tp2.page_size == 576 and tp2.page_size % 64 == 0  # GDN on XPU: a multiple of 64 (platforms/xpu.py)
    assert _plan(qwen_next, "139.8GiB", device="cuda", tp=2).page_size == 544


def test_plain_attention_model_has_one_group(shared_models):
    llama = load_layer_map(str(shared_models / "meta-llama__Meta-Llama-3.1-8B.json"))
    plan = _plan(llama, "80GiB")
    assert plan.page_size == 16 and plan.state_layers == 0 and plan.state_slots == 0
    blocks = (ceil(80 * GIB * 0.92) - plan.weights_bytes) // (16 * plan.kv_bytes_per_token)
    assert plan.kv_tokens == blocks * 16  # one group of every layer: block x all layers' bytes per token
    assert plan.ok and plan.max_running_requests == 1024


def test_options_that_are_sglangs_are_refused(nano_layer_map):
    with pytest.raises(UserError, match="mamba_cache_mode"):
        _plan(nano_layer_map, "72GiB", mamba_strategy="no_buffer")
    with pytest.raises(UserError, match="SGLang targets only"):
        _plan(nano_layer_map, "72GiB", chunked_prefill_size=4096)
    with pytest.raises(UserError, match="conv"):
        _plan(nano_layer_map, "72GiB", conv_dtype="float32")


def test_cli(capsys, shared_models):
    nano = shared_models / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"
    code = main(["plan", str(nano), "--target", "vllm==0.33.0", "--device", "cuda", "--device-memory", "72GiB"])
    out = capsys.readouterr().out
    assert code == 1 and "memory plan for vllm==0.33.0" in out and "DOES NOT FIT: max_num_seqs 1024" in out
    code = main(["plan", str(nano), "--target", "vllm", "--device", "cuda", "--device-memory", "h200", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["target"] == "vllm==0.33.0" and doc["strategy"] == "align"
    assert doc["assumed"]["gpu_memory_utilization"].startswith("0.92 ")


def test_releases_differ_where_their_source_does(nano_layer_map):
    """Read from each wheel (tools/vllm_facts.py): 0.9 until 0.19, 0.92 from 0.20; the max_num_seqs check from
    0.20; mamba_cache_mode from 0.15 (before it, one Mamba block per request)."""
    old = _plan(nano_layer_map, "72GiB", target="vllm==0.19.1")
    assert old.mem_fraction == 0.9 and "0.19.0" in old.assumed["gpu_memory_utilization"]
    assert not any("max_num_seqs" in p for p in old.problems)  # 0.19 has no such check: it starts
    assert _plan(nano_layer_map, "72GiB", target="vllm==0.20.0").mem_fraction == 0.92
    older = _plan(nano_layer_map, "72GiB", target="vllm==0.14.0")
    assert older.strategy == "none" and older.state_slots_per_request == 4
    result = validate(nano_layer_map, "vllm==0.19.1", LaunchSettings(device="cuda"), device_memory=parse_size("72GiB"))
    assert "VLLM_MAX_SEQS_ABOVE_MAMBA_BLOCKS" not in [f.code for f in result.findings]
