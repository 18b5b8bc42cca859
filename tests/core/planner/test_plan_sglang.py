"""SGLang's sizing formulas (sglang-notes §2.5) against hand computation on real configs."""

from __future__ import annotations

import pytest

from bringup.core.errors import UserError
from bringup.core.planner import plan_memory
from plan_helpers import GIB, nano_map, real_map

SG = "sglang==0.5.23"
NANO_STATE = 23 * ((4096 + 2 * 8 * 128) * 3 * 2 + 64 * 64 * 128 * 4)  # 49,082,368 B


def rest_only(lm, rest_bytes, **kw):
    """A plan whose whole budget after weights is `rest_bytes` (weights 0, fraction 1)."""
    return plan_memory(lm, device_memory=rest_bytes, mem_fraction=1.0, weights_bytes=0, target=SG, **kw)


def test_notes_example_40gib_after_weights():
    # Notes §2.5.6: TP1, 40 GiB left after weights -> ~413 slots, ~3.68 M tokens, 137 / 82 running.
    rest = 40 * GIB
    budget = rest * 0.9 / 1.9
    slots = int((budget - NANO_STATE) // NANO_STATE)
    tokens = (rest - (slots + 1) * NANO_STATE) // 6144
    no_buffer = rest_only(nano_map(), rest, device="cuda", mamba_strategy="no_buffer")
    assert (no_buffer.state_slots, no_buffer.kv_tokens) == (slots, tokens) == (413, 3_683_198)
    assert no_buffer.max_running_requests == 413 // 3 == 137
    assert no_buffer.bottleneck == "state" and no_buffer.state_slots_per_request == 3
    extra = rest_only(nano_map(), rest, device="cuda", mamba_strategy="extra_buffer")
    assert extra.max_running_requests == 413 // 5 == 82
    lazy = rest_only(nano_map(), rest, device="cuda", mamba_strategy="extra_buffer_lazy")
    assert lazy.max_running_requests == 413 // 4
    no_overlap = rest_only(nano_map(), rest, device="cuda", mamba_strategy="extra_buffer", disable_overlap_schedule=True)
    assert no_overlap.state_slots_per_request == 4


def test_disabled_radix_cache_one_slot_per_request_and_given_running():
    plan = rest_only(nano_map(), 40 * GIB, device="xpu", disable_radix_cache=True, max_running_requests=64)
    assert plan.strategy == "disabled" and plan.state_slots == 64  # case (b): slots = max_running_requests
    assert plan.kv_tokens == (40 * GIB - 65 * NANO_STATE) // 6144
    assert plan.max_running_requests == 64 and plan.bottleneck == "max_running_requests"
    sized = rest_only(nano_map(), 40 * GIB, device="cuda", max_mamba_cache_size=100)
    assert sized.state_slots == 100


@pytest.mark.parametrize("tp, kv, state", [(1, 6144, NANO_STATE), (2, 3072, NANO_STATE // 2), (4, 3072, NANO_STATE // 4)])
def test_tp_shares(tp, kv, state):
    plan = plan_memory(nano_map(), device_memory=80 * GIB, target=SG, device="cuda", tp=tp)
    assert plan.kv_bytes_per_token == kv  # 2 KV heads: replicated beyond TP 2
    assert plan.state_bytes_per_request == state
    one = plan_memory(nano_map(), device_memory=80 * GIB, target=SG, device="cuda")
    assert plan.weights_bytes == one.weights_bytes // tp


def test_group_padding_beyond_n_groups():
    # Nemotron-H-56B: 8 groups; at TP 16 SGLang pads to 16 groups, so conv is not simply /16.
    lm = real_map("nvidia__Nemotron-H-56B-Base-8K.json")
    tp1 = plan_memory(lm, device_memory=80 * GIB, target=SG, device="cuda")
    assert tp1.kv_bytes_per_token == 10 * 2 * 8 * 128 * 2
    assert tp1.conv_bytes_per_request == 54 * (256 * 64 + 2 * 8 * 256) * 3 * 2
    assert tp1.ssm_bytes_per_request == 54 * 256 * 64 * 256 * 4
    tp16 = plan_memory(lm, device_memory=80 * GIB, target=SG, device="cuda", tp=16)
    assert tp16.conv_bytes_per_request == 54 * (256 * 64 + 2 * 16 * 256) // 16 * 3 * 2
    assert tp16.kv_bytes_per_token == 10 * 2 * 1 * 128 * 2  # 8 KV heads / 16 -> 1 per rank


def test_pp_stages_and_min_tokens():
    plan = plan_memory(nano_map(pp=2), device_memory=80 * GIB, target=SG, device="cuda", pp=2)
    assert [s.layers for s in plan.stages] == [(0, 25), (26, 51)]
    assert [s.kv_layers for s in plan.stages] == [3, 3]
    assert [s.state_layers for s in plan.stages] == [12, 11]
    # every stage is charged the largest stage share of mamba layers (12)
    assert plan.state_bytes_per_request == 12 * NANO_STATE // 23
    assert plan.kv_tokens == min(s.kv_tokens for s in plan.stages)
    one = plan_memory(nano_map(), device_memory=80 * GIB, target=SG, device="cuda")
    assert sum(s.weights_bytes for s in plan.stages) == pytest.approx(one.weights_bytes, rel=1e-6)


def test_auto_strategy_per_version_on_xpu():
    new = rest_only(nano_map(), 40 * GIB, device="xpu")
    assert new.strategy == "no_buffer" and new.max_running_requests == 413 // 3
    old = plan_memory(nano_map(), device_memory=40 * GIB, mem_fraction=1.0, weights_bytes=0, target="sglang==0.5.17", device="xpu")
    assert old.strategy == "extra_buffer"  # before 0.5.20 auto picked extra_buffer on XPU (PR #32227 error 1)


@pytest.mark.parametrize("page_size", [1, 64, 128])
def test_kv_tokens_rounded_to_pages(page_size):
    plan = rest_only(nano_map(), 40 * GIB, device="cuda", page_size=page_size, mamba_strategy="extra_buffer")
    assert plan.kv_tokens == 3_683_198 // page_size * page_size


def test_weights_leave_no_room_uses_sglangs_words():
    plan = plan_memory(nano_map(), device_memory=64 * GIB, target=SG, device="cuda")  # 58.8 GiB of weights
    assert not plan.ok
    assert plan.problems[0].startswith("Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=")


def test_all_attention_holds_fewer_tokens_than_the_hybrid():
    plan = rest_only(nano_map(), 40 * GIB, device="cuda", mamba_strategy="no_buffer")
    aa = plan.all_attention
    assert aa.kv_bytes_per_token == 29 * 2 * 2 * 128 * 2  # 23 Mamba2 + 6 attention mixers
    assert aa.kv_tokens == 40 * GIB // aa.kv_bytes_per_token
    assert aa.kv_tokens < plan.kv_tokens  # the point of a hybrid
    assert aa.state_slots == 0


def test_dense_model_has_no_state_pool():
    lm = real_map("meta-llama__Meta-Llama-3.1-8B.json")
    plan = rest_only(lm, 40 * GIB, device="cuda")
    assert plan.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2
    assert plan.state_slots == 0 and plan.strategy == "none"
    tokens = 40 * GIB // plan.kv_bytes_per_token
    assert plan.kv_tokens == tokens
    assert plan.max_running_requests == min(max(2048, min(4096, int(tokens / 131072 * 512))), tokens // 2)


def test_qwen3_next_gdn_state():
    plan = rest_only(real_map("Qwen__Qwen3-Next-80B-A3B-Instruct.json"), 40 * GIB, device="cuda")
    assert plan.kv_bytes_per_token == 12 * 2 * (256 + 256) * 2 == 24 * 1024
    assert plan.state_bytes_per_request == 36 * ((32 * 128 + 2 * 16 * 128) * 3 * 2 + 32 * 128 * 128 * 4)


def test_bad_target_and_strategy():
    with pytest.raises(UserError, match="sglang==X.Y.Z"):
        plan_memory(nano_map(), device_memory=GIB, target="tgi==1.0")
    with pytest.raises(UserError, match="mamba strategy"):
        plan_memory(nano_map(), device_memory=GIB, target=SG, mamba_strategy="fast")


def test_weights_larger_than_the_device():
    plan = plan_memory(real_map("nvidia__Nemotron-H-56B-Base-8K.json"), device_memory=80 * GIB, target=SG, device="cuda")
    assert not plan.ok and "larger than the device" in plan.problems[0] and "--tp" in plan.problems[0]
    assert plan.bottleneck == "weights" and plan.max_running_requests == 0


def test_kimi_mla_cache_is_not_split_by_tp():
    lm = real_map("moonshotai__Kimi-Linear-48B-A3B-Instruct.json")
    one = rest_only(lm, 40 * GIB, device="cuda")
    four = rest_only(lm, 40 * GIB, device="cuda", tp=4)
    assert one.kv_bytes_per_token == four.kv_bytes_per_token == 7 * (512 + 64) * 2  # latent + rope, per layer
    assert four.ssm_bytes_per_request == one.ssm_bytes_per_request // 4


def test_lfm2_short_conv_has_conv_state_only():
    plan = rest_only(real_map("LiquidAI__LFM2-2.6B.json"), 40 * GIB, device="cuda")
    assert plan.conv_bytes_per_request == 22 * 2048 * (3 - 1) * 2  # channels x (L_cache - 1) x bf16
    assert plan.ssm_bytes_per_request == 0
    assert plan.kv_bytes_per_token == 8 * 2 * 8 * 64 * 2
    assert plan.strategy == "no_buffer"  # LFM2 is not allowed extra_buffer (notes §1.3)


def test_falcon_h1_every_layer_is_kv_and_state():
    plan = rest_only(real_map("tiiuae__Falcon-H1-0.5B.json"), 40 * GIB, device="cuda")
    assert plan.kv_layers == plan.state_layers == 36
    assert plan.kv_bytes_per_token == 36 * 2 * 2 * 64 * 2
    assert plan.state_bytes_per_request == 36 * ((24 * 64 + 2 * 128) * 3 * 2 + 24 * 64 * 128 * 4)
