"""The embedded engine's pool sizing: the numbers the engine allocates, checked by hand."""

from __future__ import annotations

import pytest

from bringup.core.errors import UserError
from bringup.core.planner import plan_memory
from plan_helpers import GIB, nano_map, tiny_map

# tiny_map(): layers M * M - M E -> 1 KV layer, 3 Mamba2 layers.
TINY_CELL = 2 * 2 * 8 * 2  # K+V x 2 kv heads x head_dim 8 x bf16 = 64 B/token
TINY_CONV = (32 + 2 * 2 * 16) * (4 - 1) * 2  # (intermediate + 2*groups*d_state) x (kernel-1) x bf16 = 576
TINY_SSM = 4 * 8 * 16 * 4  # heads x head_dim x d_state x fp32 = 2048
TINY_STATE = 3 * (TINY_CONV + TINY_SSM)  # 7,872 B per request
TINY_WEIGHTS = tiny_map().params_total * 2


def test_nano_per_token_and_per_request_bytes():
    plan = plan_memory(nano_map(), device_memory=141 * 10**9, device="cuda")
    assert plan.kv_bytes_per_token == 6 * 2 * 2 * 128 * 2 == 6144
    conv = (4096 + 2 * 8 * 128) * (4 - 1) * 2
    ssm = 64 * 64 * 128 * 4
    assert plan.conv_bytes_per_request == 23 * conv
    assert plan.ssm_bytes_per_request == 23 * ssm
    assert plan.state_bytes_per_request == 23 * (conv + ssm) == 49_082_368
    assert round(plan.state_bytes_per_request / 2**20, 1) == 46.8


def test_tiny_model_on_cpu_stays_small_and_planned_by_demand():
    plan = plan_memory(tiny_map(), device_memory=8 * GIB, device="cpu")
    assert plan.ok
    assert (plan.kv_bytes_per_token, plan.state_bytes_per_request) == (TINY_CELL, TINY_STATE)
    assert plan.context == 2048  # the config's max_position_embeddings, below the CPU default of 4096
    assert plan.state_slots == plan.max_running_requests == 8  # the CPU default
    assert plan.kv_tokens == 8 * 2048
    pools = plan.kv_tokens * TINY_CELL + plan.state_slots * TINY_STATE
    assert pools < 2 * 2**20  # a tiny model allocates about a megabyte, not gigabytes
    assert plan.bottleneck == "max_running_requests"
    assert 0 < plan.mem_fraction <= 0.26  # weights + at most 25 % of the rest


def test_cpu_pool_cap_for_a_big_host():
    plan = plan_memory(tiny_map(), device_memory=1024 * GIB, device="cpu", context=1_000_000, max_running_requests=10**6)
    pools = plan.kv_tokens * TINY_CELL + plan.state_slots * TINY_STATE
    assert pools <= 4 * GIB
    assert plan.device_memory * plan.mem_fraction <= TINY_WEIGHTS + 4 * GIB + 1


def test_budget_bound_split_by_hand():
    # 1,000,000 B at fraction 1.0: pools = 1e6 - weights; one request = state + 2048 tokens of KV.
    plan = plan_memory(tiny_map(), device_memory=1_000_000, mem_fraction=1.0, device="cpu", context=2048)
    pools = 1_000_000 - TINY_WEIGHTS
    per_request = TINY_STATE + 2048 * TINY_CELL
    requests = pools // per_request
    assert 0 < requests < 8
    assert plan.max_running_requests == plan.state_slots == requests
    kv = (pools - requests * TINY_STATE) // TINY_CELL // 16 * 16
    assert plan.kv_tokens == kv and plan.kv_tokens % plan.page_size == 0
    assert plan.bottleneck == "kv"  # 2048 tokens of KV cost more than one state slot here
    used = TINY_WEIGHTS + plan.kv_tokens * TINY_CELL + plan.state_slots * TINY_STATE
    assert used <= plan.device_memory * plan.mem_fraction


@pytest.mark.parametrize("page_size", [1, 16, 64, 100])
def test_kv_tokens_are_whole_pages(page_size):
    plan = plan_memory(tiny_map(), device_memory=700_000, mem_fraction=1.0, device="cpu", page_size=page_size, context=1000)
    assert plan.kv_tokens > 0 and plan.kv_tokens % page_size == 0
    assert plan.kv_pages * page_size == plan.kv_tokens


def test_caps_from_max_running_requests_and_context():
    plan = plan_memory(tiny_map(), device_memory=8 * GIB, device="cpu", max_running_requests=3, context=100, page_size=16)
    assert plan.state_slots == 3
    assert plan.kv_tokens == 3 * 112  # 100 tokens round up to 7 pages of 16


def test_gpu_reserve_and_xpu_extra():
    cuda = plan_memory(nano_map(), device_memory=80 * GIB, device="cuda")
    xpu = plan_memory(nano_map(), device_memory=80 * GIB, device="xpu")
    assert cuda.mem_fraction == pytest.approx(0.9)  # 10 % reserve above 10 GiB devices
    assert (cuda.mem_fraction - xpu.mem_fraction) * 80 * GIB == pytest.approx(2 * GIB)


def test_all_attention_comparison_holds_fewer_tokens():
    # Same 40 GiB of pools: the hybrid keeps KV for 6 layers, an all-attention Nano would for 29 mixers.
    lm = nano_map()
    plan = plan_memory(lm, device_memory=100 * GIB, mem_fraction=1.0, device="cuda", context=262_144,
                       max_running_requests=10_000)
    assert plan.all_attention.kv_bytes_per_token == 29 * 1024
    assert plan.all_attention.max_running_requests < plan.max_running_requests


def test_does_not_fit_is_a_problem_not_a_crash():
    plan = plan_memory(nano_map(), device_memory=32 * GIB, device="cuda")
    assert not plan.ok and "leave no room" in plan.problems[0]
    with pytest.raises(UserError, match="weights"):
        plan.require_fit()
    tight = plan_memory(tiny_map(), device_memory=200_000, mem_fraction=1.0, device="cpu", context=2048)
    assert tight.max_running_requests == 0 and "lower --context" in tight.problems[0]


def test_given_weights_and_bad_input():
    plan = plan_memory(tiny_map(), device_memory=8 * GIB, device="cpu", weights_bytes=12345)
    assert (plan.weights_bytes, plan.weights_source) == (12345, "given")
    with pytest.raises(UserError, match="one device"):
        plan_memory(tiny_map(), device_memory=GIB, tp=2)
    with pytest.raises(UserError, match="unknown SSM state dtype"):
        plan_memory(tiny_map(), device_memory=GIB, ssm_dtype="float13")
    with pytest.raises(UserError, match="mem-fraction"):
        plan_memory(tiny_map(), device_memory=GIB, mem_fraction=1.5)


def test_float32_engine_doubles_weights_and_kv():
    bf16 = plan_memory(tiny_map(), device_memory=8 * GIB, device="cpu")
    fp32 = plan_memory(tiny_map(), device_memory=8 * GIB, device="cpu", dtype="float32")
    assert fp32.weights_bytes == 2 * bf16.weights_bytes
    assert fp32.kv_bytes_per_token == 2 * bf16.kv_bytes_per_token
    assert fp32.conv_bytes_per_request == 2 * bf16.conv_bytes_per_request  # conv follows the model dtype
    assert fp32.ssm_bytes_per_request == bf16.ssm_bytes_per_request


def test_device_memory_may_be_a_float_but_not_nonsense():
    assert plan_memory(tiny_map(), device_memory=8.0 * GIB, device="cpu").device_memory == 8 * GIB
    for bad in (0, -5, "8G", None, True):
        with pytest.raises(UserError, match="device memory"):
            plan_memory(tiny_map(), device_memory=bad)
