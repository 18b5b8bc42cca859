"""vLLM as a second target (issue 12): the target grammar, its rules read from vLLM 0.33.0 (hybrid KV
cache page alignment, mamba_cache_mode, max_num_seqs against the Mamba blocks, TP, XPU backends),
the `vllm serve` command, and its `vllm:` metrics in the scraper."""

from __future__ import annotations

import pytest
from packaging.version import Version

from bringup.core.client.metrics_scrape import MetricsReader
from bringup.core.diagnosis import diagnose
from bringup.core.errors import UserError
from bringup.core.launch import Endpoint
from bringup.core.planner.device_presets import preset
from bringup.core.layermap.sizes import parse_size
from bringup.core.rules import LaunchSettings, known_targets, parse_target
from bringup.core.validate import validate
from bringup.core.rules.targets import read_target, vllm_targets
from bringup.core.sources.resolve import load_layer_map


@pytest.fixture(scope="module")
def qwen_next(shared_models):
    return load_layer_map(str(shared_models / "Qwen__Qwen3-Next-80B-A3B-Instruct.json"))


def _codes(result):
    return [f.code for f in result.findings]


def _one(result, code):
    (f,) = [f for f in result.findings if f.code == code]
    return f


def test_target_grammar():
    assert read_target("vllm==0.33.0") == ("vllm", "0.33.0", Version("0.33.0"))
    assert parse_target("vllm==0.33.0").label == "vllm==0.33.0"
    assert "vllm==0.33.0" in vllm_targets() and not any(t.startswith("vllm") for t in known_targets())
    older = parse_target("vllm==0.30.0")
    assert [f.code for f in older.findings] == ["TARGET_PROFILE_NEAREST"]
    with pytest.raises(UserError, match="never read"):
        parse_target("vllm==0.6.0")
    with pytest.raises(UserError, match="vllm==X.Y.Z"):
        parse_target("tgi==1.0")


def test_hybrid_block_size_is_raised_to_the_mamba_page_and_rounded_on_xpu(qwen_next):
    # XPU's FlashAttention works in 64-token blocks, so the alignment lands on a multiple of 64 at once
    result = validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="xpu", tp=2))
    assert result.ok and result.resolved.page_size == 576 and result.resolved.attention_backend == "FLASH_ATTN"
    raised = _one(result, "VLLM_BLOCK_SIZE_RAISED")
    assert "576 tokens" in raised.engine_message and "[XPU]" not in raised.engine_message
    assert list(raised.layers) == qwen_next.full_attention_layers
    # what Validate predicts is what Diagnose recognises in vLLM's log
    assert "VLLM_BLOCK_SIZE_RAISED" in [f.code for f in diagnose(raised.engine_message).findings]
    padded = _one(result, "VLLM_MAMBA_PAGE_PADDED")
    assert "7.46%" in padded.engine_message
    # Triton aligns to 16 (544); XPU's GDN kernel then rounds the block up to a multiple of 64
    triton = validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="xpu", tp=2, attention_backend="TRITON_ATTN"))
    message = _one(triton, "VLLM_BLOCK_SIZE_RAISED").engine_message
    assert triton.resolved.page_size == 576 and "544 tokens" in message and "[XPU]" in message
    on_cuda = validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="cuda", tp=2))
    assert on_cuda.resolved.page_size == 544  # no XPU GDN rounding
    # on Hopper the GDN prefill runs FlashInfer, whose 64-token checkpoints the block must hold
    hopper = validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="cuda", gpu="hopper", tp=2))
    assert hopper.resolved.page_size == 576
    assert validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="cuda", gpu="hopper", tp=2,
                                                              disable_radix_cache=True)).resolved.page_size == 544


def test_cpu_runs_hybrids_from_a_128_token_block(nano_layer_map):
    result = validate(nano_layer_map, "vllm==0.33.0", LaunchSettings(device="cpu"))
    assert result.ok and result.resolved.page_size % 128 == 0 and result.resolved.mamba_ssm_dtype == "float32"


def test_kimi_linear_aligns_to_mla_blocks_with_a_float32_kda_state(shared_models):
    # MLA hybrids align to 128 tokens; KDA keeps its recurrent state in float32 unless bfloat16 is asked
    kimi = load_layer_map(str(shared_models / "moonshotai__Kimi-Linear-48B-A3B-Instruct.json"))
    result = validate(kimi, "vllm==0.33.0", LaunchSettings(device="cuda", gpu="hopper"))
    assert result.ok and result.resolved.page_size == 1920 and result.resolved.mamba_ssm_dtype == "float32"
    smaller = validate(kimi, "vllm==0.33.0", LaunchSettings(device="cuda", gpu="hopper", mamba_ssm_dtype="bfloat16"))
    assert smaller.resolved.page_size == 1024
    on_cuda_float32 = validate(kimi, "vllm==0.33.0", LaunchSettings(device="cuda", gpu="hopper", dtype="float32"))
    flashmla = validate(kimi, "vllm==0.33.0", LaunchSettings(device="cuda", gpu="blackwell", attention_backend="FLASHMLA"))
    # what Validate predicts is what Diagnose recognises in vLLM's log
    for result, code in ((on_cuda_float32, "VLLM_NO_ATTENTION_BACKEND"), (flashmla, "VLLM_ATTENTION_BACKEND_INVALID")):
        assert code in [f.code for f in diagnose(_one(result, code).engine_message).findings]


def test_kv_cache_groups_and_their_padding(qwen_next, nano_layer_map):
    groups = _one(validate(nano_layer_map, "vllm==0.33.0", LaunchSettings(device="cuda")), "VLLM_KV_CACHE_GROUPS")
    assert "groups of 6: 1 attention group(s) and 4 Mamba group(s)" in groups.message
    assert groups.engine_message == "Add 1 padding layers, may waste at most 4.35% KV cache memory"
    assert "VLLM_PADDING_LAYERS" in [f.code for f in diagnose(groups.engine_message).findings]
    even = _one(validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="cuda")), "VLLM_KV_CACHE_GROUPS")
    assert "1 attention group(s) and 3 Mamba group(s)" in even.message and not even.engine_message


def test_mamba_cache_mode_follows_prefix_caching(qwen_next):
    assert validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="cuda")).resolved.mamba_strategy == "align"
    off = validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="cuda", disable_radix_cache=True))
    assert off.resolved.mamba_strategy == "none" and "--no-enable-prefix-caching" in off.command


def test_xpu_attention_backends(qwen_next):
    bad = validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="xpu", attention_backend="intel_xpu"))
    f = _one(bad, "VLLM_XPU_ATTENTION_BACKEND")
    assert f.is_error and "Invalid attention backend for xpu" in f.engine_message
    ok = validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="xpu", attention_backend="TRITON_ATTN"))
    assert ok.ok and ok.resolved.attention_backend == "TRITON_ATTN" and "--attention-backend TRITON_ATTN" in ok.command


def test_a_release_candidate_gets_its_release_line_rules(nano_layer_map):
    """vllm==0.19.0rc1 is a 0.19 release: none of 0.20's rules (the max_num_seqs check at graph capture,
    gpu_memory_utilization 0.92) apply to it; it was once read as the newest release read (0.33.0)."""
    memory = parse_size("72GiB")
    rc = validate(nano_layer_map, "vllm==0.19.0rc1", LaunchSettings(device="cuda"), device_memory=memory)
    final = validate(nano_layer_map, "vllm==0.19.0", LaunchSettings(device="cuda"), device_memory=memory)
    assert rc.target.release == Version("0.19.0rc1")
    assert "VLLM_MAX_SEQS_ABOVE_MAMBA_BLOCKS" not in _codes(rc)
    assert _codes(rc) == _codes(final)
    assert rc.plan.mem_fraction == final.plan.mem_fraction == 0.9
    newer = validate(nano_layer_map, "vllm==0.20.0", LaunchSettings(device="cuda"), device_memory=memory)
    assert "VLLM_MAX_SEQS_ABOVE_MAMBA_BLOCKS" in _codes(newer) and newer.plan.mem_fraction == 0.92


def test_removed_architecture(shared_models):
    lm = load_layer_map(str(shared_models / "MiniMaxAI__MiniMax-M1.json"))
    f = _one(validate(lm, "vllm==0.33.0", LaunchSettings(device="cuda")), "VLLM_ARCH_REMOVED")
    assert f.is_error and "until v0.23.0" in f.engine_message


def test_max_num_seqs_above_the_mamba_blocks(nano_layer_map):
    result = validate(nano_layer_map, "vllm==0.33.0", LaunchSettings(device="cuda"), device_memory=parse_size("72GiB"))
    f = _one(result, "VLLM_MAX_SEQS_ABOVE_MAMBA_BLOCKS")
    assert f.is_error and not result.ok
    blocks = int(f.fix.split()[2])
    assert 0 < blocks < 1024 and f"({blocks})" in f.engine_message
    assert list(f.layers) == nano_layer_map.state_layers
    assert [g.code for g in diagnose(f.engine_message).findings] == ["VLLM_MAX_SEQS_ABOVE_MAMBA_BLOCKS"]
    roomy = validate(nano_layer_map, "vllm==0.33.0", LaunchSettings(device="cuda"), device_memory=preset("h200").memory_bytes)
    assert roomy.ok and "PLAN_FITS" in _codes(roomy)


def test_one_request_of_the_max_model_len_must_fit(shared_models):
    lfm2 = load_layer_map(str(shared_models / "LiquidAI__LFM2-2.6B.json"))  # 128,000-token context
    result = validate(lfm2, "vllm==0.33.0", LaunchSettings(device="xpu"), device_memory=parse_size("6GiB"))
    f = _one(result, "VLLM_KV_TOO_SMALL_FOR_MAX_LEN")
    assert f.is_error and "128,000 tokens" in f.message and f.fix.startswith("pass --max-model-len ")
    fits = int(f.fix.split()[2])
    assert 0 < fits < 128_000 and fits % result.resolved.page_size == 0
    assert list(f.layers) == lfm2.full_attention_layers
    assert [g.code for g in diagnose(f.engine_message).findings] == ["VLLM_KV_TOO_SMALL_FOR_MAX_LEN"]


def test_weights_that_do_not_fit(qwen_next):
    result = validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="xpu"), device_memory=parse_size("64GiB"))
    assert not result.ok and result.first_error.code == "PLAN_WEIGHTS_DO_NOT_FIT"


def test_tp_rules_in_vllms_words(nano_layer_map):
    result = validate(nano_layer_map, "vllm==0.33.0", LaunchSettings(device="cuda", tp=3))
    heads = _one(result, "TP_MAMBA_HEADS")
    assert heads.engine_message == "AssertionError: Tensor parallel world size must divide num heads."
    assert "TP_NOT_DIVIDING_MAMBA_HEADS" in [f.code for f in diagnose(heads.engine_message).findings]


def test_vllm_serve_command(qwen_next, tmp_path):
    result = validate(qwen_next, "vllm==0.33.0", LaunchSettings(device="cuda", tp=4, page_size=64))
    assert result.command == ("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --block-size 64 "
                              "--tensor-parallel-size 4")
    from fake_vllm import install

    vllm = install(tmp_path / "bin")  # the `vllm` command of the environment that runs the launch
    argv = result.launch.argv(endpoint=Endpoint("127.0.0.1", 8123), python=str(tmp_path / "bin" / "python"))
    assert argv[:3] == [str(vllm), "serve", "Qwen/Qwen3-Next-80B-A3B-Instruct"]
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "8123"]


VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
vllm:num_requests_running{{engine="0",model_name="m"}} {running}
vllm:num_requests_waiting{{engine="0",model_name="m"}} 3.0
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.25
vllm:prompt_tokens_total{{engine="0",model_name="m"}} {prompt}
vllm:generation_tokens_total{{engine="0",model_name="m"}} {gen}
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="m"}} {ttft_sum}
vllm:time_to_first_token_seconds_count{{engine="0",model_name="m"}} {ttft_count}
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="m"}} 7.0
"""


def test_vllm_metrics_are_graphed():
    reader = MetricsReader()
    first = reader.sample(VLLM_METRICS.format(running=2, prompt=100, gen=50, ttft_sum=1.0, ttft_count=2), t=0.0)
    assert reader.prefix == "vllm:" and first.running == 2 and first.queued == 3 and first.token_usage == 0.25
    assert first.requests_total == 7 and first.kv_total is None  # vLLM exports no pool sizes: no false zero
    second = reader.sample(VLLM_METRICS.format(running=4, prompt=300, gen=150, ttft_sum=2.0, ttft_count=4), t=2.0)
    assert second.prompt_tok_s == 100 and second.gen_tok_s == 50 and second.ttft_s == 0.5


def test_pp_stage_without_attention_in_vllms_split(nano_layer_map):
    from bringup.core.rules.vllm_facts import pp_ranges

    assert pp_ranges(52, 8) == [(0, 6), (6, 12), (12, 18), (18, 25), (25, 32), (32, 39), (39, 46), (46, 52)]
    result = validate(nano_layer_map, "vllm==0.33.0", LaunchSettings(device="cuda", pp=8))
    found = [f for f in result.findings if f.code == "VLLM_PP_STAGE_WITHOUT_ATTENTION"]
    assert [f.layers for f in found] == [(7, 9, 11), (46, 48, 50)]  # stages 1 and 7 hold only Mamba and MoE
    block = result.resolved.page_size
    assert all(f.severity == "warning" and f.fix.startswith(f"pass --block-size {block} ") for f in found)
    assert [g.code for g in diagnose(found[0].engine_message).findings] == ["VLLM_BLOCK_SIZES_NOT_ALIGNED"]
    aligned = validate(nano_layer_map, "vllm==0.33.0", LaunchSettings(device="cuda", pp=8, page_size=block))
    assert all(f.severity == "info" for f in aligned.findings if f.code == "VLLM_PP_STAGE_WITHOUT_ATTENTION")
    assert not [f for f in validate(nano_layer_map, "vllm==0.33.0", LaunchSettings(device="cuda", pp=2)).findings
                if f.code == "VLLM_PP_STAGE_WITHOUT_ATTENTION"]


def test_the_default_block_and_the_cpu_triton_check_follow_the_release(shared_models):
    # CacheConfig.DEFAULT_BLOCK_SIZE is 16 in 0.33.0 and 64 in 0.34.0 (config/cache.py:185 of each wheel)
    llama = load_layer_map(str(shared_models / "meta-llama__Meta-Llama-3.1-8B.json"))
    hopper = LaunchSettings(device="cuda", gpu="hopper")
    assert validate(llama, "vllm==0.33.0", hopper).resolved.page_size == 16
    assert validate(llama, "vllm==0.34.0", hopper).resolved.page_size == 64
    # ROCM_ATTN keeps its native 16-token kernel whatever the default (rocm_attn.py:167-172 in 0.34.0)
    assert validate(llama, "vllm==0.34.0", LaunchSettings(device="rocm")).resolved.page_size == 16
    # 0.34.0 refuses an x86 CPU without triton-cpu, where 0.33.0 warned in its own log
    assert "VLLM_CPU_TRITON" not in _codes(validate(llama, "vllm==0.33.0", LaunchSettings(device="cpu")))
    warned = _one(validate(llama, "vllm==0.34.0", LaunchSettings(device="cpu")), "VLLM_CPU_TRITON")
    assert warned.severity == "warning" and warned.engine_message == "vLLM on x86 CPUs requires Triton (triton-cpu)."
    assert "VLLM_CPU_TRITON" in [f.code for f in diagnose(warned.engine_message).findings]  # Diagnose knows it
