"""Every catalogue entry recognises a line in its engine's own wording (and its needles let it through)."""

from __future__ import annotations

import pytest

from bringup.core.diagnosis import PATTERNS, codes, diagnose
from bringup.core.diagnosis.needles import needles

TB = "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"

EXAMPLES = {
    "LAYER_NOT_IN_FULL_ATTENTION": "ValueError: layer_id=0 not in full attention layers: dict_keys([10, 13, 17, 27])",
    "PP_VALUE_BUFFER_INDEX": TB + "    return self.v_buffer[layer_id - self.start_layer]  # get_value_buffer\n"
                             "IndexError: list index out of range",
    "MISSING_GET_V_HEAD_DIM": "AttributeError: 'MHATokenToKVPool' object has no attribute 'get_v_head_dim'",
    "EXTRA_BUFFER_PLATFORM": "AssertionError: extra_buffer needs CUDA/MUSA/NPU (FLA).",
    "EXTRA_BUFFER_UNSUPPORTED": "AssertionError: extra_buffer is not supported for NemotronHForCausalLM; use no_buffer.",
    "EXTRA_BUFFER_SPECULATIVE": "AssertionError: extra_buffer for Qwen3NextForCausalLM does not support speculative "
                                "decoding; use --mamba-radix-cache-strategy no_buffer.",
    "STRATEGY_NEEDS_MAMBA": "ValueError: --mamba-radix-cache-strategy extra_buffer needs mamba state, got LlamaForCausalLM.",
    "NO_BUFFER_PAGE_SIZE": "AssertionError: no_buffer only supports page_size=1.",
    "NO_BUFFER_OVERLAP": "AssertionError: no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True.",
    "NO_BUFFER_TRTLLM": "AssertionError: no_buffer do not support trtllm_mha attention backend.",
    "LAZY_NEEDS_OVERLAP": "AssertionError: Lazy extra buffer requires overlap schedule (--disable-overlap-schedule is incompatible)",
    "LAZY_UNDER_PD": "AssertionError: extra_buffer_lazy unsupported under PD disaggregation; use "
                     "--mamba-radix-cache-strategy extra_buffer.",
    "CHUNK_PAGE_DIVISIBLE": "AssertionError: For SSM models, either chunk_size or page_size must be divisible by the "
                            "other, got chunk_size=128, page_size=96",
    "CHUNKED_PREFILL_PAGE": "AssertionError: chunked_prefill_size must be divisible by page_size",
    "TRITON_FIRST_LAYER_NOT_ATTENTION": "AssertionError: Lfm2MoeForCausalLM does not support triton attention backend, "
                                        "as the first layer might not be an attention layer",
    "UNKNOWN_HYBRID": "ValueError: Expected hybrid GDN or NemotronH models, but got unknown model. If this is a custom "
                      "hybrid model, use register_linear_attn_model()",
    "SHORT_CONV_NPU": "NotImplementedError: Short-conv hybrid models (ZAYA1 CCA, LFM2 / LFM2-MoE) are not yet "
                      "supported on NPU.",
    "GDN_BLACKWELL_BACKEND": "AssertionError: Only ['triton', 'trtllm_mha', 'fa4', 'flashinfer'] backends are "
                             "supported on Blackwell GPUs for hybrid GDN models. Got prefill=fa3, decode=fa3.",
    "LINEAR_ATTN_INTEL_XPU": "RuntimeError: --linear-attn-backend intel_xpu requires Intel XPU",
    "SAMPLING_BACKEND_XPU": "ValueError: --sampling-backend intel_xpu requires --device xpu, got --device cuda",
    "WEIGHTS_LEAVE_NO_KV": "ValueError: Loaded weights leave no GPU memory for the KV cache under "
                           "--mem-fraction-static=0.5. Raise --mem-fraction-static above 0.612 or reduce the model size.",
    "STATE_CACHE_NO_MEMORY": "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
                             "Computed max_mamba_cache_size=0 (total_rest_memory=0.09 GB, mamba_cache_per_req=73.69 MB).",
    "STATE_CACHE_TOO_SMALL": "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests.",
    "MAMBA_SLOTS_EXHAUSTED": "AssertionError: Not enough space for mamba cache, try to increase "
                             "--mamba-full-memory-ratio or --max-mamba-cache-size. mid=None, self.mamba_pool.available_size()=0",
    "MAMBA_PING_PONG_EXHAUSTED": "AssertionError: Not enough space for mamba ping pong idx, try to increase "
                                 "--mamba-full-memory-ratio.",
    "MAX_RUNNING_CAPPED_BY_STATE": "[2026-11-03 08:00:41 TP0] max_running_requests is capped to 137 by the mamba "
                                   "state cache (max_mamba_cache_size=413, 3 state slots per request).",
    "MAX_RUNNING_REDUCED": "[2026-11-03 08:00:41 TP0] max_running_requests was reduced from the requested 1024 to 82.",
    "PAGE_SIZE_CHANGED": "Intel XPU attention backend only supports page_sizes of [64, 128], changing page_size "
                         "from 16 to 128.",
    "XMX_FALLBACK": "WARNING: The current platform does not support Intel XMX, will fallback to triton backend.",
    "MAX_TOTAL_TOKENS_TOO_LARGE": "WARNING: max_total_tokens=5000000 is larger than the profiled value 3683198. "
                                  "Use the profiled value instead.",
    "INVALID_SSM_DTYPE": "WARNING: Invalid mamba_ssm_dtype 'fp8' in env or config. Using default 'float32'.",
    "RELU2_MOE_UNSUPPORTED": "AssertionError: activation = relu2 is not supported.",
    "CAUSAL_CONV1D_MISSING": "NameError: name 'causal_conv1d_fn_triton' is not defined",
    "CONV1D_UPDATE_XPU_KWARG": "TypeError: causal_conv1d_update_xpu() got an unexpected keyword argument "
                               "'intermediate_conv_window'",
    "NEMOTRON_PATTERN": "ValueError: Pattern must only contain characters 'M', '*', '-' or 'E'. Got MEMX*",
    "TRACK_INTERVAL_PAGE": TB + "    assert view.mamba_track_interval % view.page_size == 0\nAssertionError",
    "TRACK_INTERVAL_SPECULATIVE": TB + "    assert view.mamba_track_interval >= view.speculative_num_draft_tokens\n"
                                  "AssertionError",
    "HEALTH_CHECK_TIMEOUT": "Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.",
    "LAYER_NOT_IN_POOL": "PoolLayerError: layer 12 is not in the state pool; it holds layers [0, 2, 4]",
    "ENGINE_POOL_EXHAUSTED": "PoolExhaustedError: asked for 1 slots but only 0 of 8 are free",
    "ENGINE_POOL_INTEGRITY": "PoolIntegrityError: page 7 is owned by both 'a' and 'b'",
    "ENGINE_POOLS_DO_NOT_FIT": "bringup serve: cannot size the engine's pools: the weights (58.82 GiB) leave no room",
    "ENGINE_NO_REQUEST_FITS": "bringup serve: the pools have room for no request at all; give the engine more memory",
    "ENGINE_PROMPT_TOO_LONG": "RequestRejected: the prompt has 9000 tokens and needs 563 KV pages of 16 tokens, but the "
                              "KV pool holds only 512 pages (8192 tokens)",
    "DEVICE_OUT_OF_MEMORY": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
                            "total capacity of 79.11 GiB of which 3.12 MiB is free.",
    "HOST_OUT_OF_MEMORY": "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't "
                          "allocate memory: you tried to allocate 63155874688 bytes. Error code 12",
    "TORCH_NOT_COMPILED_FOR_DEVICE": "AssertionError: Torch not compiled with CUDA enabled",
    "NO_DEVICE_FOUND": "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU",
    "INVALID_DEVICE_ORDINAL": "RuntimeError: CUDA error: invalid device ordinal",
    "FP64_UNSUPPORTED": "RuntimeError: Required aspect fp64 is not supported on the device",
    "DTYPE_NOT_IMPLEMENTED": "RuntimeError: \"rms_norm\" not implemented for 'Float8_e4m3fn'",
    "DTYPE_UNSUPPORTED": "TypeError: Got unsupported ScalarType BFloat16",
    "DEVICE_SIDE_ASSERT": "RuntimeError: CUDA error: device-side assert triggered",
    "TRITON_OUT_OF_RESOURCES": "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: "
                               "163840, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.",
    "SEGFAULT": "Fatal Python error: Segmentation fault",
    "MODULE_MISSING": "ModuleNotFoundError: No module named 'sgl_kernel'",
    "UNKNOWN_ARCHITECTURE": "ValueError: Unrecognized configuration class <class 'X'> for this kind of AutoModel: "
                            "AutoModelForCausalLM.",
    "TRUST_REMOTE_CODE": "Loading this model requires you to execute the configuration file in that repo on your "
                         "local machine. Make sure you have read the code there to avoid malicious use, then set "
                         "the option `trust_remote_code=True` to remove this error.",
    "WEIGHTS_NOT_INITIALIZED": "Some weights of NemotronHForCausalLM were not initialized from the model checkpoint "
                               "at /ckpt and are newly initialized: ['backbone.layers.0.mixer.D']",
    "HUB_UNREACHABLE": "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find "
                       "them in the cached files.",
    "HUB_GATED": "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url",
    "UNRECOGNIZED_ERROR": TB + "KeyError: 'backbone.embeddings.weight'",
}


def test_every_code_has_an_example():
    assert set(EXAMPLES) == set(codes())


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_example_is_recognised(code):
    found = [f.code for f in diagnose(EXAMPLES[code]).findings]
    assert found == [code]


def test_needles_come_from_the_regex():
    assert needles(r"layer_id=(?P<layer>\d+) not in full") == (" not in full",)
    assert needles(r"abcd|efgh") == ("abcd", "efgh")
    assert needles(r"a|(?P<x>\d+)") is None  # an alternative with no literal: always run the regex
    for p in PATTERNS:
        if p.needles:
            assert all(n and "\n" not in n for n in p.needles), p.code
