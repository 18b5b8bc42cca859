"""SGLang's memory defaults by release and device memory (read from each wheel, issue 18), and the
planner against real start-up logs kept in tests/data/sglang_startup with their sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.core.errors import UserError
from bringup.core.planner import plan_memory
from bringup.core.planner.sglang_defaults import prefill_graph_sizes
from bringup.core.planner.startup_log import parse_startup_log
from bringup.core.sources.resolve import load_layer_map
from plan_helpers import GIB, nano_map

from repo_paths import DATA

MB = 1024**2
LOGS = DATA / "sglang_startup"
RELEASES = ("0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")


def plan(version, memory, **kw):
    kw.setdefault("device", "cuda")
    return plan_memory(nano_map(), device_memory=memory, target=f"sglang=={version}", weights_bytes=0, **kw)


# (device GiB, chunked prefill up to 0.5.19, from 0.5.20): the 20-35 GB rung moved from 2048 to 4096 in 0.5.20.
@pytest.mark.parametrize("gib, old, new", [(16, 2048, 2048), (24, 2048, 4096), (34, 2048, 4096), (48, 4096, 4096),
                                           (80, 8192, 8192), (141, 8192, 8192), (180, 16384, 16384)])
@pytest.mark.parametrize("version", RELEASES)
def test_chunked_prefill_default_by_device_memory_and_release(version, gib, old, new):
    p = plan(version, gib * GIB)
    expected = old if version <= "0.5.19" else new
    assert p.assumed["chunked_prefill_size"].startswith(f"{expected} (sglang {version} default for devices ")
    assert "memory_hook.py" in p.assumed["chunked_prefill_size"] or "server_args.py" in p.assumed["chunked_prefill_size"]


def test_decode_graph_max_bs_by_memory_tp_and_release():
    assert plan("0.5.19", 24 * GIB).assumed["cuda_graph_max_bs"].startswith("24 ")
    assert plan("0.5.20", 24 * GIB).assumed["cuda_graph_max_bs"].startswith("48 ")
    assert plan("0.5.20", 24 * GIB, tp=4).assumed["cuda_graph_max_bs"].startswith("160 ")
    # 0.5.22 lowers a default max_bs above --max-running-requests to it; 0.5.21 does not.
    assert plan("0.5.22", 80 * GIB, max_running_requests=32).assumed["cuda_graph_max_bs"].startswith("32 (capped")
    assert plan("0.5.21", 80 * GIB, max_running_requests=32).assumed["cuda_graph_max_bs"].startswith("256 ")


def test_auto_mem_fraction_counts_chunk_graphs_floor_and_xpu_reserve():
    gpu_mb = 141 * 10**9 / MB
    prefill = len(prefill_graph_sizes(8192)) * 8
    assert prefill == 58 * 8
    cuda = plan("0.5.23", 141 * 10**9)
    reserved = 512 + 1.5 * 8192 + 1 / 8 * 1024 + 256 * 2 + prefill
    assert cuda.mem_fraction == round((gpu_mb - reserved) / gpu_mb, 3)
    assert "decode graphs 256 x 2 MB + prefill graphs 464 MB" in cuda.assumed["mem_fraction_static"]
    # XPU: no prefill graphs off CUDA, decode graphs opt-in (platform_hook.py), the oneDNN scratch from 0.5.20.
    xpu = plan("0.5.23", 141 * 10**9, device="xpu")
    assert xpu.mem_fraction == round((gpu_mb - (512 + 1.5 * 8192 + 128 + 2048)) / gpu_mb, 3)
    assert "no decode graphs on XPU by default, python/sglang/srt/arg_groups/platform_hook.py:" in \
        xpu.assumed["mem_fraction_static"]
    old_xpu = plan("0.5.19", 141 * 10**9, device="xpu")
    assert old_xpu.mem_fraction == round((gpu_mb - (512 + 1.5 * 8192 + 128)) / gpu_mb, 3)
    small = plan("0.5.23", 48 * GIB)  # below 60 GB: no 10 GB floor, chunked prefill 4096
    r = 512 + 1.5 * 4096 + 128 + 32 * 2 + len(prefill_graph_sizes(4096)) * 8
    assert small.mem_fraction == round((48 * 1024 - r) / (48 * 1024), 3)


def test_the_users_values_win():
    p = plan("0.5.23", 16 * GIB, chunked_prefill_size=8192, cuda_graph_max_bs=64)
    assert "chunked_prefill_size" not in p.assumed and "cuda_graph_max_bs" not in p.assumed
    r = 512 + 1.5 * 8192 + 128 + 64 * 2 + len(prefill_graph_sizes(8192)) * 8
    assert p.mem_fraction == round((16 * 1024 - r) / (16 * 1024), 3)
    fixed = plan("0.5.23", 16 * GIB, mem_fraction=0.8)
    assert fixed.mem_fraction == 0.8 and "mem_fraction_static" not in fixed.assumed
    no_graphs = plan("0.5.23", 16 * GIB, disable_cuda_graph=True)
    assert no_graphs.mem_fraction == round((16 * 1024 - (512 + 1.5 * 2048 + 128)) / (16 * 1024), 3)
    with pytest.raises(UserError, match="--chunked-prefill-size must be at least 1"):
        plan("0.5.23", 16 * GIB, chunked_prefill_size=0)


@pytest.mark.parametrize("version, strategy, slots", [("0.5.17", "extra_buffer", 5), ("0.5.18", "extra_buffer", 5),
                                                      ("0.5.19", "extra_buffer", 5), ("0.5.20", "no_buffer", 3),
                                                      ("0.5.21", "no_buffer", 3), ("0.5.23", "no_buffer", 3)])
def test_auto_strategy_on_xpu_per_release(version, strategy, slots):
    p = plan(version, 40 * GIB, device="xpu", mem_fraction=1.0)
    assert (p.strategy, p.state_slots_per_request) == (strategy, slots)
    if strategy == "no_buffer":
        assert any("never picks extra_buffer on XPU" in n and "overrides.py" in n for n in p.notes)


def test_newer_and_older_releases():
    newer = plan("0.6.0", 80 * GIB)
    assert any("newer than the newest profile; the defaults of 0.5.23 are used" in n for n in newer.notes)
    with pytest.raises(UserError, match="older than the oldest profile"):
        plan("0.5.10", 80 * GIB)


# --- real start-up logs ---------------------------------------------------------------------------

def _log(name):
    return parse_startup_log((LOGS / name).read_text())


def test_lfm2_700m_on_a_16gb_gpu():
    """sgl-project/sglang PR #16065: LFM2-700M, bench_one_batch, auto mem fraction on a 16 GB GPU."""
    log = _log("lfm2-700m-16gb.log")
    assert (log.kv_tokens, log.mamba_slots) == (473_854, 85_292)
    lm = load_layer_map(str(LOGS / "LiquidAI__LFM2-700M.json"))
    common = dict(device_memory=16 * GIB, available_memory=log.loaded_from, weights_bytes=log.weights,
                  target="sglang==0.5.17", device="cuda")
    p = plan_memory(lm, **common)
    assert p.assumed["chunked_prefill_size"].startswith("2048 ")  # the old fixed 8192 was 87 % low here
    assert p.strategy == "no_buffer"  # the log's "Disabling overlap schedule since mamba no_buffer ..."
    assert p.kv_tokens == pytest.approx(log.kv_tokens, rel=0.03)
    assert p.state_slots == pytest.approx(log.mamba_slots, rel=0.03)
    # That build predates prefill cuda graphs (the log captures decode graphs bs [1, 2, 4, 8] only): without
    # the prefill-graph reserve the plan is within half a percent.
    graphs_off = plan_memory(lm, **common, disable_cuda_graph=True)
    assert graphs_off.kv_tokens == pytest.approx(log.kv_tokens, rel=0.005)
    assert graphs_off.state_slots == pytest.approx(log.mamba_slots, rel=0.005)
    old_guess = plan_memory(lm, **common, chunked_prefill_size=8192)
    assert old_guess.kv_tokens < 0.2 * log.kv_tokens


def test_nemotron_3_nano_tp4_on_arc_pro_b60():
    """The XPU test report for test_nvidia_nemotron_3_nano.py: TP4, page 64, --mem-fraction-static 0.85."""
    log = _log("nemotron-3-nano-tp4-arc-b60.log")
    assert (log.kv_tokens, log.mamba_slots, log.max_running_requests) == (1_557_504, 8, 8)
    p = plan_memory(nano_map(), device_memory=24 * GIB, available_memory=log.loaded_from, weights_bytes=log.weights * 4,
                    target="sglang==0.5.23", device="xpu", tp=4, mem_fraction=0.85, page_size=64,
                    disable_radix_cache=True, disable_overlap_schedule=True, max_running_requests=8, context=8192,
                    chunked_prefill_size=1024, cuda_graph_max_bs=8)
    assert p.weights_bytes == pytest.approx(log.weights, rel=1e-6)
    assert p.kv_tokens % 64 == 0 and p.kv_tokens == pytest.approx(log.kv_tokens, rel=0.01)
    assert (p.state_slots, p.max_running_requests) == (log.mamba_slots, log.max_running_requests)
    assert p.assumed == {}  # every default this launch depends on was given on its command line


def test_nemotron_3_nano_omni_tp4_split_of_the_rest():
    """A 0.5.21 TP4 log (GB10, fp8 KV, auto strategy) without its memory budget: rebuild the rest SGLang split
    from the pool sizes it prints and check the planner splits it the same way (the 0.9 mamba ratio, TP4 state
    shares, 1 KV head per rank, the extra_buffer ratio on CUDA)."""
    log = _log("nemotron-3-nano-omni-tp4-gb10.log")
    assert (log.mamba_slots, log.kv_tokens, log.max_running_requests) == (2211, 19_644_177, 32)
    per_slot = 23 * ((4096 + 2 * 8 * 128) // 4 * 3 * 2 + 64 // 4 * 64 * 128 * 4)  # conv bf16 + ssm fp32, one rank
    rest = (log.mamba_slots + 1) * per_slot + log.kv_tokens * 6 * 1 * 128 * 2  # mamba pool + K and V in fp8
    p = plan_memory(nano_map(), device_memory=rest, mem_fraction=1.0, weights_bytes=0, target="sglang==0.5.21",
                    device="cuda", tp=4, kv_dtype="fp8_e4m3", max_running_requests=32)
    assert p.state_bytes_per_request == per_slot and p.kv_bytes_per_token == 1536
    assert p.state_slots == pytest.approx(log.mamba_slots, abs=1)
    assert p.kv_tokens == pytest.approx(log.kv_tokens, rel=0.001)
    assert (p.strategy, p.state_slots_per_request, p.max_running_requests) == ("extra_buffer", 5, 32)
