"""SGLang's own texts, verbatim from its source (sglang-notes §2-§4), with the exception class that
carries each. Texts read per release (no_buffer, extra_buffer, lazy, intel_xpu page size) live in the
profiles (sglang_releases.py), each with its file and line."""

from __future__ import annotations

EXTRA_BUFFER_PLATFORM = "AssertionError: {text}"
CHUNK_PAGE = ("AssertionError: For SSM models, either chunk_size or page_size must be divisible by the other, "
              "got chunk_size={chunk}, page_size={page}")
TRACK_INTERVAL = "AssertionError"  # mamba_track_interval % page_size == 0 is asserted without a message
STRATEGY_NEEDS_MAMBA = "ValueError: --mamba-radix-cache-strategy {strategy} needs mamba state, got {arch}."
NONE_SUBSCRIPT = "TypeError: 'NoneType' object is not subscriptable"
LAYER_ID = "ValueError: layer_id={layer} not in full attention layers: dict_keys({layers})"
NO_XMX = "The current platform does not support Intel XMX, will fallback to triton backend."
DEFAULT_BACKEND = "Attention backend not specified. Use {backend} backend by default."
GDN_NPU = ("AssertionError: ascend backend is the only supported backend on NPU for hybrid GDN models, use "
           "--attention-backend ascend to specify the backend.")
SHORT_CONV_NPU = "NotImplementedError: Short-conv hybrid models (ZAYA1 CCA, LFM2 / LFM2-MoE) are not yet supported on NPU…"
LINEAR_XPU_DEVICE = "--linear-attn-backend intel_xpu requires Intel XPU"
DIVISIBLE = "AssertionError: {num} is not divisible by {den}"
TORCH_NATIVE_GRAPH = "Cuda graph is disabled because of using torch native attention backend"
UNKNOWN_HYBRID = ("Expected hybrid GDN or NemotronH models, but got unknown model. If this is a custom hybrid model, "
                  "use register_linear_attn_model() …")
PP_OVERLAP = "Pipeline parallelism is incompatible with overlap schedule."
TRTLLM_NOT_BLACKWELL = ("ValueError: TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100). "
                        "Please use a different prefill backend.")
