"""The failure classes of hybrid bring-up (issue 12): each from a realistic log in its engine's own
format (SGLang, vLLM with its `(EngineCore_DP0 pid=..)` prefixes, a plain traceback) gives a
recognised finding with a fix, and marks the layers a message names."""

from __future__ import annotations

import pytest

from bringup.core.diagnosis import all_codes, diagnose
from bringup.core.diagnosis.all_patterns import PATTERNS
from bringup.core.diagnosis.prefixes import strip_prefix

V = "(EngineCore_DP0 pid=4410) ERROR 09-10 18:22:20 [core.py:708] "
W = "(Worker_TP0 pid=4466) ERROR 09-10 18:22:20 [multiproc_executor.py:822] "


def vllm(*lines: str, prefix: str = V) -> str:
    return "\n".join(prefix + line for line in lines)


SGLANG_TB = "[2026-07-17 10:02:11 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"

LOGS = {
    # --- the XPU sequence after PR #32227 -------------------------------------------------------------
    "NO_BUFFER_PAGE_SIZE": (
        "[2026-07-17 10:01:58] WARNING server_args.py:1402: intel_xpu only supports page_sizes of [32, 64, 128], "
        "changing page_size from 1 to 64\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/sglang/python/sglang/srt/arg_groups/mamba_hook.py", line 88, in validate_mamba_no_buffer\n'
        "    assert self.page_size == 1, \"no_buffer only supports page_size=1.\"\n"
        "AssertionError: no_buffer only supports page_size=1."
    ),
    "CAUSAL_CONV1D_MISSING": (
        SGLANG_TB
        + '  File "/opt/sglang/python/sglang/srt/layers/attention/mamba/mamba.py", line 523, in forward\n'
        "    else causal_conv1d_fn_triton\n"
        "NameError: name 'causal_conv1d_fn_triton' is not defined"
    ),
    "CUDA_HELPER_ON_XPU": (
        SGLANG_TB
        + '  File "/opt/sglang/python/sglang/srt/layers/attention/mamba/ops/ssd_chunk_state.py", line 702, in _chunk_cumsum_fwd\n'
        "    with torch.cuda.device(dt.device.index):\n"
        '  File "/usr/lib/python3.12/site-packages/torch/cuda/__init__.py", line 310, in _lazy_init\n'
        '    raise AssertionError("Torch not compiled with CUDA enabled")\n'
        "AssertionError: Torch not compiled with CUDA enabled"
    ),
    "SM_COUNT_ON_XPU": (
        SGLANG_TB
        + '  File "/opt/sglang/python/sglang/srt/layers/attention/fla/utils.py", line 141, in get_multiprocessor_count\n'
        "    return torch.xpu.get_device_properties(index).multi_processor_count\n"
        "AttributeError: '_XpuDeviceProperties' object has no attribute 'multi_processor_count'"
    ),
    "MOE_ACTIVATION_XPU": (
        SGLANG_TB
        + '  File "/opt/sglang/python/sglang/srt/layers/quantization/unquant.py", line 586, in forward_xpu\n'
        '    assert moe_runner_config.activation in ["silu", "gelu"], f"activation = {moe_runner_config.activation} is not supported."\n'
        "AssertionError: activation = relu2 is not supported."
    ),
    "XPU_KERNEL_KWARG": (
        SGLANG_TB
        + '  File "/opt/sglang/python/sglang/srt/layers/attention/mamba/mamba.py", line 610, in forward\n'
        "    ssm_state = selective_state_update_xpu(\n"
        "TypeError: selective_state_update_xpu() got an unexpected keyword argument 'intermediate_states_buffer'"
    ),
    "TRITON_XPU_BUILD_FAILED": (
        "L0 build module failed. Log: error: total scratch space exceeds HW supported limit for kernel "
        "_chunk_scan_fwd_kernel: 336128 bytes (max permitted PTSS 262144 bytes)\n"
        "error: backend compiler failed build.\n"
        "Error during Intel loadBinary: ZE_RESULT_ERROR_MODULE_BUILD_FAILURE\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/sglang/python/sglang/srt/layers/attention/mamba/ops/ssd_chunk_scan.py", line 512, in _chunk_scan_fwd\n'
        "RuntimeError: ZE_RESULT_ERROR_MODULE_BUILD_FAILURE"
    ),
    "XPU_NATIVE_API_OOM": (
        SGLANG_TB
        + '  File "/opt/sglang/python/sglang/srt/model_executor/model_runner.py", line 1711, in init_memory_pool\n'
        "RuntimeError: Native API failed. Native API returns: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)"
    ),
    # --- hybrid capacity -------------------------------------------------------------------------------
    "STATE_CACHE_TOO_SMALL": (
        SGLANG_TB + '  File "/opt/sglang/python/sglang/srt/mem_cache/kv_cache_configurator.py", line 402, in resolve_max_num_reqs\n'
        "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests."
    ),
    "MAX_RUNNING_CAPPED_BY_STATE": (
        "[2026-07-17 10:02:03 TP0] WARNING kv_cache_configurator.py:388: max_running_requests is capped to 42 by "
        "the mamba state cache (max_mamba_cache_size=128, 3 state slots per request)"
    ),
    "VLLM_MAX_SEQS_ABOVE_MAMBA_BLOCKS": vllm(
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/vllm/config/compilation.py", line 1526, in set_cudagraph_mode',
        "    raise ValueError(",
        "ValueError: max_num_seqs (256) exceeds available Mamba cache blocks (97). Each decode sequence requires "
        "one Mamba cache block, so CUDA graph capture cannot proceed. Please lower max_num_seqs to at most 97 or "
        "increase gpu_memory_utilization.",
    ),
    # a PP rank with no attention layer never aligns its Mamba block (vllm #51752, reproduced on 0.27.0)
    "VLLM_BLOCK_SIZES_NOT_ALIGNED": vllm(
        "WorkerProc failed to start.",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/vllm/distributed/kv_transfer/kv_connector/v1/offloading/'
        'config.py", line 114, in build_offloading_config',
        "    assert tokens_per_block % tokens_per_hash == 0, (",
        "AssertionError: tokens_per_block=16 not divisible by tokens_per_hash=512. Hybrid models (e.g. "
        "Mamba+Attention) need --enable-prefix-caching to align block sizes.", prefix=W),
    "VLLM_BLOCK_SIZE_RAISED": "\n".join([
        "(EngineCore_DP0 pid=4410) INFO 09-10 18:21:40 [interface.py:1109] Setting attention block size to 544 "
        "tokens to ensure that attention page size is >= mamba page size.",
        "(EngineCore_DP0 pid=4410) INFO 09-10 18:21:40 [xpu.py:519] [XPU]Setting attention block size to 576 tokens "
        "to ensure multiple of 64.",
    ]),
    "VLLM_MAMBA_PAGE_PADDED": "(EngineCore_DP0 pid=4410) INFO 09-10 18:21:40 [interface.py:1133] Padding mamba page "
                              "size by 1.49% to ensure that mamba page size and attention page size are exactly equal.",
    "VLLM_NO_CACHE_MEMORY": vllm(
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/vllm/v1/core/kv_cache_planning.py", line 57, in _check_enough_kv_cache_memory',
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine.",
    ),
    "VLLM_KV_TOO_SMALL_FOR_MAX_LEN": vllm(
        "ValueError: To serve at least one request with the model's max seq len (262144), (24.00 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (9.12 GiB). Based on the available memory, the "
        "estimated maximum model length is 99584. Try increasing `gpu_memory_utilization`"
    ),
    "VLLM_MAMBA_CACHE_MODE_NONE": "(EngineCore_DP0 pid=4410) WARNING 09-10 18:21:39 [config.py:783] Mamba cache mode "
                                  "is set to 'none' when prefix caching is disabled",
    "VLLM_MAMBA_PREFIX_NEEDS_CHUNKED": vllm("AssertionError: Chunked prefill is required for Mamba prefix caching."),
    "VLLM_INVALID_ATTENTION_BACKEND": vllm(
        '  File "/usr/lib/python3.12/site-packages/vllm/platforms/xpu.py", line 265, in get_attn_backend_cls',
        "    raise ValueError(",
        "ValueError: Invalid attention backend for xpu, with use_mla: False",
    ),
    "VLLM_DTYPE_FLOAT16": vllm("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
                               "  Value error, The model type 'gemma3_text' does not support float16. Reason: Numerical "
                               "instability. Please use bfloat16 or float32 instead."),
    "VLLM_CPU_TRITON": vllm('  File "/opt/vllm/vllm/platforms/cpu.py", line 243, in check_and_update_config',
                            '    raise RuntimeError("vLLM on x86 CPUs requires Triton (triton-cpu).")',
                            "RuntimeError: vLLM on x86 CPUs requires Triton (triton-cpu)."),
    "VLLM_NO_ATTENTION_BACKEND": vllm(
        "ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=576, "
        "dtype=torch.float32, kv_cache_dtype=auto, block_size=None, use_mla=True). Reasons: {FLASH_ATTN_MLA: "
        "[dtype not supported]}."),
    "VLLM_ATTENTION_BACKEND_INVALID": vllm(
        "ValueError: Selected backend AttentionBackendEnum.FLASHMLA is not valid for this configuration. Reason: "
        "['FlashMLA Dense is only supported on Hopper devices.']"),
    "VLLM_PADDING_LAYERS": "(EngineCore_DP0 pid=4410) WARNING 09-10 18:22:09 [kv_cache_planning.py:537] Add 1 "
                           "padding layers, may waste at most 4.35% KV cache memory",
    "VLLM_HMA_FORCED_UNSUPPORTED": "ValueError: Hybrid KV cache manager was explicitly enabled but is not supported "
                                   "in this configuration. Consider omitting the --enable-hybrid-kv-cache-manager flag",
    # --- parallelism ------------------------------------------------------------------------------------
    "TP_NOT_DIVIDING_MAMBA_HEADS": vllm(
        '  File "/usr/lib/python3.12/site-packages/vllm/model_executor/layers/mamba/mamba_mixer2.py", line 316, in __init__',
        "    assert num_heads % self.tp_size == 0, (",
        "AssertionError: Tensor parallel world size must divide num heads.",
        prefix=W,
    ),
    "TP_NOT_DIVIDING_MAMBA_GROUPS": vllm("AssertionError: If tensor parallel world size does not divide num_groups, "
                                         "then num_groups must equal 1.", prefix=W),
    "TP_NOT_DIVIDING_HEADS": "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3).",
    # --- the mirror of the seed crash -------------------------------------------------------------------
    "LAYER_NOT_IN_STATE_POOL": (
        SGLANG_TB
        + '  File "/opt/sglang/python/sglang/srt/layers/attention/mamba/mamba2_backend.py", line 301, in forward_decode\n'
        "    conv_state, ssm_state = self.req_to_token_pool.mamba2_layer_cache(layer.layer_id)\n"
        '  File "/opt/sglang/python/sglang/srt/mem_cache/memory_pool.py", line 412, in get_mamba_params\n'
        "    internal_idx = self.mamba_map[layer_id]\n"
        "KeyError: 5"
    ),
    "VLLM_ENGINE_CORE_FAILED": vllm("EngineCore failed to start."),
}

NEW_CODES = {p.code for p in PATTERNS} - {p.code for p in __import__(
    "bringup.core.diagnosis.catalogue", fromlist=["PATTERNS"]).PATTERNS}


def test_every_new_class_has_a_log():
    assert NEW_CODES <= set(LOGS), NEW_CODES - set(LOGS)
    assert set(LOGS) <= set(all_codes())


@pytest.mark.parametrize("code", sorted(LOGS))
def test_log_gives_a_recognised_finding_with_a_fix(code):
    result = diagnose(LOGS[code])
    found = {f.code: f for f in result.findings}
    assert code in found, [f.code for f in result.findings]
    assert "UNRECOGNIZED_ERROR" not in found
    finding = found[code]
    assert finding.fix and finding.source
    assert "{" not in finding.title + finding.explanation + finding.fix  # every field filled


def test_vllm_prefixes_are_stripped():
    assert strip_prefix(V + "ValueError: x") == "ValueError: x"
    assert strip_prefix(W + "  File \"a.py\", line 1") == "  File \"a.py\", line 1"
    assert strip_prefix("(VllmWorker rank=1 pid=2939) ERROR 08-29 08:21:29 [multiproc_executor.py:511] KeyError: 3") == "KeyError: 3"
    assert strip_prefix("INFO 02-08 04:14:57 __init__.py:190] Automatically detected platform tpu.") == \
        "Automatically detected platform tpu."
    assert strip_prefix("[2026-07-17 10:02:11 TP0] Load weight end.") == "[2026-07-17 10:02:11 TP0] Load weight end."


def test_vllm_log_without_a_known_message_is_not_empty_handed():
    # the complaint: a prefixed vLLM traceback gave no finding at all
    log = vllm("EngineCore failed to start.", "Traceback (most recent call last):",
               '  File "/x/vllm/v1/engine/core.py", line 699, in run_engine_core',
               "RuntimeError: something nobody catalogued")
    codes = [f.code for f in diagnose(log).findings]
    assert codes == ["VLLM_ENGINE_CORE_FAILED", "UNRECOGNIZED_ERROR"]


def test_bare_keyerror_from_the_state_pool_marks_the_layer_and_the_state_layers(nano_layer_map):
    f = next(f for f in diagnose(LOGS["LAYER_NOT_IN_STATE_POOL"], nano_layer_map).findings)
    assert f.code == "LAYER_NOT_IN_STATE_POOL"
    assert f.requested_layer == 5 and f.layers[0] == 5
    assert list(f.valid_layers) == nano_layer_map.state_layers
    assert f.requested.mixer == "attention"
    assert "layer 5 is a" in f.explanation


def test_bare_keyerror_elsewhere_is_not_a_state_pool_finding():
    log = "Traceback (most recent call last):\n  File \"x.py\", line 3, in f\n    d[k]\nKeyError: 5"
    assert [f.code for f in diagnose(log).findings] == ["UNRECOGNIZED_ERROR"]


def test_uncatalogued_traceback_that_names_a_layer_is_read_by_its_structure(nano_layer_map):
    log = vllm(
        "Traceback (most recent call last):",
        '  File "/x/vllm/model_executor/models/nemotron_h.py", line 402, in load_weights',
        "    param = params_dict[name]",
        "KeyError: 'backbone.layers.12.mixer.in_proj.weight'",
        prefix="(Worker_TP1 pid=4467) ERROR 09-10 18:22:20 [multiproc_executor.py:822] ",
    )
    (f,) = diagnose(log, nano_layer_map).findings
    # A parameter name under load_weights: the general reader calls it a checkpoint/model name mismatch.
    assert f.code == "FAILURE_WEIGHTS_MISMATCH" and f.layers == (12,)
    assert "Layer 12 is an FFN-only block" in f.explanation or "layer 12" in f.explanation.lower()


def test_xpu_findings_supersede_the_generic_ones():
    codes = [f.code for f in diagnose(LOGS["CUDA_HELPER_ON_XPU"]).findings]
    assert codes == ["CUDA_HELPER_ON_XPU"]  # not also TORCH_NOT_COMPILED_FOR_DEVICE
    codes = [f.code for f in diagnose(LOGS["XPU_NATIVE_API_OOM"]).findings]
    assert codes == ["XPU_NATIVE_API_OOM"]  # not also the generic DEVICE_OUT_OF_MEMORY
    codes = [f.code for f in diagnose(LOGS["MOE_ACTIVATION_XPU"]).findings]
    assert codes == ["MOE_ACTIVATION_XPU"]


def test_the_xpu_sequence_one_log_one_finding_each():
    """The errors a Nemotron-H bring-up on XPU meets one after another, in one session's log."""
    sequence = ["NO_BUFFER_PAGE_SIZE", "CAUSAL_CONV1D_MISSING", "CUDA_HELPER_ON_XPU", "MOE_ACTIVATION_XPU",
                "XPU_KERNEL_KWARG", "TRITON_XPU_BUILD_FAILED", "XPU_NATIVE_API_OOM"]
    log = "\n".join(LOGS[c] + "\n" + "\n".join(["[2026-07-17] retry"] * 45) for c in sequence)
    found = [f.code for f in diagnose(log).findings]
    assert [c for c in found if c in sequence] == sequence
    assert "UNRECOGNIZED_ERROR" not in found


def test_vllm_facts_are_read():
    log = "\n".join([
        "(APIServer pid=4380) INFO 09-10 18:21:30 [api_server.py:1896] vLLM API server version 0.33.0",
        "(EngineCore_DP0 pid=4410) INFO 09-10 18:21:58 [gpu_model_runner.py:5089] Model loading took 74.56 GiB "
        "memory and 41.2 seconds",
        "(EngineCore_DP0 pid=4410) INFO 09-10 18:22:10 [gpu_worker.py:773] Available KV cache memory: 9.12 GiB",
        "(EngineCore_DP0 pid=4410) INFO 09-10 18:22:11 [kv_cache_utils.py:1148] GPU KV cache size: 99,584 tokens, "
        "Maximum concurrency for 262,144 tokens per request: 1.52x",
    ])
    facts = diagnose(log).facts
    assert facts["vllm_version"] == "0.33.0"
    assert facts["weights_gb"] == 74.56
    assert facts["kv_memory_gb"] == 9.12
    assert facts["kv_tokens"] == 99584
    assert facts["max_concurrency"] == 1.52


def test_a_silent_state_cap_is_named_with_the_real_cap(nano_layer_map):
    log = "\n".join([
        "[2026-07-17 10:01:50] server_args=ServerArgs(model_path='nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B', device='xpu', "
        "mamba_radix_cache_strategy='no_buffer', disable_radix_cache=False)",
        "[2026-07-17 10:02:01 TP0] Mamba Cache is allocated. max_mamba_cache_size: 128, conv_state size: 0.84GB, "
        "ssm_state size: 11.50GB",
        "[2026-07-17 10:02:03 TP0] max_total_num_tokens=1351442, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=42, context_len=262144, available_gpu_mem=3.12 GB",
    ])
    (f,) = [f for f in diagnose(log, nano_layer_map).findings if f.code == "STATE_CAPS_RUNNING"]
    assert f.severity == "warning" and "128 // 3" in f.explanation and f.details["running"] == 42
    assert list(f.layers) == nano_layer_map.state_layers
    # a limit the state pool does not explain is not called a cap
    other = log.replace("max_running_requests=42", "max_running_requests=40")
    assert "STATE_CAPS_RUNNING" not in [f.code for f in diagnose(other).findings]
    # when the log says it itself, the catalogue's finding is enough
    said = log + ("\n[2026-07-17 10:02:03 TP0] max_running_requests is capped to 42 by the mamba state cache "
                  "(max_mamba_cache_size=128, 3 state slots per request)")
    codes = [f.code for f in diagnose(said).findings]
    assert "MAX_RUNNING_CAPPED_BY_STATE" in codes and "STATE_CAPS_RUNNING" not in codes


def test_a_layer_the_traceback_names_is_marked_on_a_recognised_finding(nano_layer_map):
    """`layer ids outside a stage`: the PP stage asked its KV pool for layer 0 (get_value_buffer(0))."""
    log = (SGLANG_TB + '  File "/opt/sglang/srt/layers/attention/triton_backend.py", line 97, in __init__\n'
           "    self.v_head_dim = model_runner.token_to_kv_pool.get_value_buffer(0).shape[-1]\n"
           '  File "/opt/sglang/srt/mem_cache/memory_pool.py", line 741, in get_value_buffer\n'
           "    return self.v_buffer[layer_id - self.start_layer]\n"
           "IndexError: list index out of range")
    (f,) = diagnose(log, nano_layer_map).findings
    assert f.code == "PP_VALUE_BUFFER_INDEX" and f.layers == (0,) and "names layer 0" in f.explanation
