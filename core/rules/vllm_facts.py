"""What vLLM does with a hybrid launch, read from its released source, with file:line beside each fact.

Read from vllm 0.33.0 (the wheel from PyPI, `pip download --no-deps vllm==0.33.0`). A target of
another release uses these facts with a note saying so (core/rules/targets.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.core.versions import release

READ_VERSION = release("0.33.0")


@dataclass(frozen=True)
class Fact:
    value: object
    source: str


# vllm/model_executor/models/registry.py:73-... (_TEXT_GENERATION_MODELS): the architectures of the
# families the workbench reads (core/families), with the module that implements each.
ARCHITECTURES = {
    "Qwen3NextForCausalLM": "registry.py:118 qwen3_next",
    "Qwen3_5ForCausalLM": "registry.py qwen3_5",
    "NemotronHForCausalLM": "registry.py:186 nemotron_h",
    "FalconH1ForCausalLM": "registry.py:110 falcon_h1",
    "JambaForCausalLM": "registry.py:146 jamba",
    "KimiLinearForCausalLM": "registry.py:148 kimi_linear",
    "Lfm2ForCausalLM": "registry.py:152 lfm2",
    "Lfm2MoeForCausalLM": "registry.py lfm2_moe",
    "Zamba2ForCausalLM": "registry.py:217 zamba2",
    "GraniteMoeHybridForCausalLM": "registry.py:133 granitemoehybrid",
    "GptOssForCausalLM": "registry.py:128 gpt_oss",
    "Gemma3ForCausalLM": "registry.py:114 gemma3",
    "LlamaForCausalLM": "registry.py llama",
    "Qwen3ForCausalLM": "registry.py:202 qwen3",
}
# registry.py:841-... (_PREVIOUSLY_SUPPORTED_MODELS): removed architectures and the last release with them.
REMOVED = {"BambaForCausalLM": "0.23.0", "MiniMaxText01ForCausalLM": "0.23.0", "MiniMaxM1ForCausalLM": "0.23.0",
           "MiniMaxForCausalLM": "0.23.0"}
REMOVED_SOURCE = "vllm/model_executor/models/registry.py:860-863 (_PREVIOUSLY_SUPPORTED_MODELS), :1231-1238"
REMOVED_MESSAGE = ("ValueError: Model architecture {arch} was supported in vLLM until v{last}, and is not supported "
                   "anymore. Please use an older version of vLLM if you want to use this model architecture.")

# Platforms: CUDA, ROCm (torch calls it cuda), XPU and CPU are in-tree; NPU is the vllm-ascend plugin.
DEVICES = Fact(("cuda", "rocm", "xpu", "cpu"), "vllm/platforms/__init__.py (builtin platform plugins)")
# The hybrid KV cache manager (attention and Mamba groups in one block pool) is what hybrids need; every
# in-tree platform has it in 0.33.0 (the CPU one too: found by the oracle, issue 31).
HYBRID_KV_CACHE = Fact({"cuda": True, "rocm": True, "xpu": True, "cpu": True},
                       "vllm/platforms/cuda.py:683-684, rocm.py:1389-1390, xpu.py:535-536, cpu.py:649-650 "
                       "(support_hybrid_kv_cache; the default, interface.py:1354-1356, is False)")

DEFAULT_BLOCK_SIZE = Fact(16, "vllm/config/cache.py:185, :462-463")
GPU_MEMORY_UTILIZATION = Fact(0.92, "vllm/config/cache.py:215")
PREFIX_CACHING_DEFAULT = Fact(True, "vllm/config/cache.py:257")
# `vllm serve` (OPENAI_API_SERVER): 1024 on devices of >= 70 GiB (not A100, not GB10), else 256.
MAX_NUM_SEQS_SERVE = Fact(((70, 1024), (0, 256)), "vllm/engine/arg_utils.py:2959-2990 (get_batch_defaults)")

# XPU attention backends: FLASH_ATTN by default; float32 falls back to TRITON_ATTN; TRITON_ATTN and
# FLASH_ATTN may be asked for; anything else raises.
# TRITON_FLASH_ATTN is taken only for multimodal prefix-LM models (xpu.py:213-252), which the workbench does
# not serve: for a text model it reaches the `elif selected_backend: raise` (found by the oracle, issue 31).
# float32 runs TRITON_ATTN even when FLASH_ATTN is asked (the dtype test comes first, xpu.py:255-263).
XPU_ATTENTION = Fact(("FLASH_ATTN", "TRITON_ATTN"), "vllm/platforms/xpu.py:191-193, 255-271")
# MLA models on XPU: TRITON_MLA or FLASH_ATTN_MLA (falling back to Triton where FlashAttention MLA does
# not fit); any other asked backend raises (found by the oracle, issue 31: TRITON_MLA is taken).
XPU_MLA_ATTENTION = Fact(("TRITON_MLA", "FLASH_ATTN_MLA"), "vllm/platforms/xpu.py:160-190")
XPU_INVALID_BACKEND = "ValueError: Invalid attention backend for xpu, with use_mla: {mla}"
XPU_INVALID_BACKEND_SOURCE = "vllm/platforms/xpu.py:264-268"
# On XPU a GDN layer's kernel works in 64-token blocks: the attention block is rounded up to 64.
XPU_GDN_BLOCK = Fact(64, "vllm/platforms/xpu.py:491-521 (update_block_size_for_backend)")
# Triton and FlashAttention kernels take any multiple of 16 tokens per block.
KERNEL_BLOCK_ALIGNMENT = Fact(16, "vllm/v1/attention/backends/triton_attn.py:339-340 (MultipleOf(16))")
# The attention backend vLLM picks when none is asked: the first of the platform's priorities
# ("blackwell": CUDA capability 10, which puts FlashInfer first).
DEFAULT_ATTENTION = Fact({"cuda": "FLASH_ATTN", "blackwell": "FLASHINFER", "rocm": "ROCM_ATTN", "xpu": "FLASH_ATTN",
                          "cpu": "CPU_ATTN"},
                         "vllm/platforms/cuda.py:156-181 (_get_backend_priorities), rocm.py:553-557, xpu.py:255-271, "
                         "cpu.py:188-197")
# The smallest block a backend's kernels take, where it is not 16 (get_supported_kernel_block_sizes):
# FlashAttention on XPU works in 64-token blocks, the CPU kernels in 32-token ones. TRITON_ATTN,
# FLASHINFER (without its Blackwell large pages) and ROCM_ATTN take 16.
KERNEL_BLOCK = Fact({("xpu", "FLASH_ATTN"): 64, ("cpu", "CPU_ATTN"): 32},
                    "vllm/v1/attention/backends/flash_attn.py:357-367, cpu_attn.py:65-66; triton_attn.py:339-340, "
                    "flashinfer.py:585-604, rocm_attn.py:153-165")
# MLA hybrids: the attention block is a multiple of 128 (TRTLLM/FlashInfer MLA decode kernels need
# 128 / kernel-block physical blocks; vLLM applies it for every MLA backend).
MLA_BLOCK_ALIGNMENT = Fact(128, "vllm/platforms/interface.py:1083-1088")
# KDA (Kimi-Linear): the recurrent state is float32 unless bfloat16 is asked ("auto" -> float32);
# float16 is refused.
KDA_STATE_DTYPE = Fact("float32", "vllm/model_executor/layers/mamba/mamba_utils.py:133-149 (kda_state_dtype); "
                                  "models/kimi_k3/nvidia/model.py:1495-1503")
# FlashAttention 4's head-256 kernel (capability 10.x/11.x, head size 256, FLASH_ATTN asked there) works in
# 128-token pages (found by the oracle, issue 31: Qwen3-Next on B200 aligns to 640, not 576).
FA4_HD256_BLOCK = Fact(128, "vllm/v1/attention/backends/flash_attn.py:364-366, :375-376; fa_utils.py:14, :224-233")
# CUDA's MLA backends run float16/bfloat16 only: float32 leaves none (the selector raises).
CUDA_MLA_DTYPES = Fact(("float16", "bfloat16"), "vllm/v1/attention/backends/mla/triton_mla.py:100, flashmla.py:47, "
                                                "flashattn_mla.py:41, flashinfer_mla.py:194, cutlass_mla.py:39; "
                                                "platforms/cuda.py:472-475")
NO_BACKEND_MESSAGE = ("ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size={head}, "
                      "dtype=torch.float32, ...)")
# FlashMLA's dense kernel runs on Hopper only (capability 9.x); asked elsewhere, the selector raises.
FLASHMLA_HOPPER = Fact("hopper", "vllm/v1/attention/ops/flashmla.py:50-58; platforms/cuda.py:430-445")
FLASHMLA_MESSAGE = ("ValueError: Selected backend AttentionBackendEnum.FLASHMLA is not valid for this configuration. "
                    "Reason: ['FlashMLA Dense is only supported on Hopper devices.']")
# The block vLLM starts from when --block-size is not given (update_block_size_for_backend phase 1,
# platforms/interface.py:771-783): the backend's preferred size, the default 16 where its kernels take it
# (v1/attention/backend.py:155-163); FlashAttention on XPU prefers 64; the CPU platform starts from 128.
# ROCM_ATTN keeps its native 16-token kernel whatever the default (0.34.0 rocm_attn.py:167-172; 0.33.0 has no
# override and its default is 16 anyway).
PREFERRED_BLOCK = Fact({("xpu", "FLASH_ATTN"): 64, ("cpu", "CPU_ATTN"): 128, ("rocm", "ROCM_ATTN"): 16},
                       "vllm/v1/attention/backends/flash_attn.py:372-379; platforms/cpu.py:560-564 (128); "
                       "rocm_attn.py:167-172 (0.34.0)")
# Qwen's gated DeltaNet in mamba_cache_mode align, with FlashInfer's GDN prefill (CUDA capability 9.0;
# 10.x/12.x with linear_key_head_dim 128 and a CUDA 13 runtime, which the 0.33.0 wheel links:
# libcudart.so.13), exports prefill checkpoints every 64 tokens, and the block becomes a multiple of 64.
GDN_FLASHINFER_ALIGNMENT = Fact(64, "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:245-268, :689-696; "
                                    "v1/attention/backends/gdn_attn.py:34; platforms/interface.py:1088-1092")
# On CPU with AVX512-BF16 (the Xeons the rules assume), the SSM state cache is reset to float32 unless
# float16/bfloat16 is asked for a gated-DeltaNet model.
CPU_SSM_FLOAT32 = Fact("float32", "vllm/platforms/cpu.py:319-338, :44-95 (_cpu_mamba_backend)")

# Page alignment: the attention block grows until one attention page (block x bytes per token) is
# at least one Mamba state; the Mamba page is then padded to the attention page exactly.
PAGE_ALIGNMENT_SOURCE = ("vllm/platforms/interface.py:750-795 (update_block_size_for_backend, run once the model is loaded: "
                         "v1/executor/uniproc_executor.py:75), :940-1130 (_align_hybrid_block_size)")
BLOCK_RAISED_MESSAGE = ("Setting attention block size to {block} tokens to ensure that attention page size is >= "
                        "mamba page size.")
PADDING_MESSAGE = ("Padding mamba page size by {pct:.2f}% to ensure that mamba page size and attention page size "
                   "are exactly equal.")

# mamba_cache_mode: "align" with prefix caching (the default), "none" without; align needs chunked prefill.
MAMBA_CACHE_MODE_SOURCE = "vllm/model_executor/models/config.py:763-786 (MambaModelConfig); config/cache.py:176, 304"

# Group size of the hybrid KV cache: the fewest layers of one kind (or the most, when they are
# within 1.5x); each block of the pool holds one page for each of group_size layers.
GROUP_SIZE_SOURCE = "vllm/v1/core/kv_cache_planning.py:521-545 (_get_kv_cache_groups_uniform_page_size), :680"
PADDING_LAYERS_MESSAGE = "Add {n} padding layers, may waste at most {pct:.2f}% KV cache memory"
PADDING_LAYERS_SOURCE = "vllm/v1/core/kv_cache_planning.py:533-541"
# One request of max_model_len must fit: attention layers take cdiv(len, block) pages each, Mamba
# layers one page (mamba_cache_mode none) or two (align).
NEEDED_SOURCE = ("vllm/v1/core/kv_cache_planning.py:66-87 (_check_enough_kv_cache_memory); "
                 "v1/kv_cache_interface.py:643-648 (attention), :1135-1141 (Mamba)")
NEEDED_MESSAGE = ("ValueError: To serve at least one request with the model's max seq len ({max_len}), ({need:.2f} GiB KV "
                  "cache is needed, which is larger than the available KV cache memory ({have:.2f} GiB).")
MAX_SEQS_MESSAGE = ("ValueError: max_num_seqs ({seqs}) exceeds available Mamba cache blocks ({blocks}). Each decode "
                    "sequence requires one Mamba cache block, so CUDA graph capture cannot proceed.")
MAX_SEQS_SOURCE = "vllm/config/compilation.py:1517-1531"

# Model types that refuse float16 (ModelConfig's dtype check, reached before anything is loaded).
FLOAT16_NOT_SUPPORTED = Fact(("gemma2", "gemma3", "gemma3_text", "glm4"), "vllm/config/model.py:2398-2420")
FLOAT16_MESSAGE = ("ValueError: The model type '{model_type}' does not support float16. Reason: Numerical instability. "
                   "Please use bfloat16 or float32 instead.")
# TP: attention heads, Mamba2 heads and groups.
TP_HEADS_MESSAGE = "ValueError: Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp})."
TP_HEADS_SOURCE = "vllm/config/model.py:1558-1564"
TP_MAMBA_HEADS_MESSAGE = "AssertionError: Tensor parallel world size must divide num heads."
TP_MAMBA_GROUPS_MESSAGE = "AssertionError: If tensor parallel world size does not divide num_groups, then num_groups must equal 1."
TP_MAMBA_SOURCE = "vllm/model_executor/layers/mamba/mamba_mixer2.py:315-323"


def group_size(counts: list[int]) -> int:
    """vLLM's hybrid group size for these per-kind layer counts."""
    counts = [c for c in counts if c]
    if not counts:
        return 0
    low, high = min(counts), max(counts)
    return high if high < low * 1.5 else low

# --- the block pool's sizing (the planner, core/planner/vllm.py) -----------------------------------
# vLLM asks for ceil(total memory x gpu_memory_utilization) and keeps for the cache what the profiling
# run leaves of it: requested - (weights + peak activations + non-torch memory) - the CUDA-graph
# estimate (only with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS).
REQUESTED_MEMORY_SOURCE = "vllm/v1/worker/utils.py:724-726 (request_memory)"
AVAILABLE_KV_SOURCE = "vllm/v1/worker/gpu_worker.py:753-757 (available_kv_cache_memory_bytes)"
# One pool of blocks: bytes per block = the largest group's pages (page x group size); every group
# draws its block ids from the same pool.
NUM_BLOCKS_SOURCE = "vllm/v1/core/kv_cache_planning.py:574-593, :678-681 (num_blocks = available // bytes_per_block)"
# A request of L tokens holds cdiv(L, block) blocks in each attention group and, in each Mamba group,
# 2 blocks with mamba_cache_mode align, 1 with none (plus speculative / prefill-checkpoint blocks, 0
# by default).
ATTENTION_BLOCKS_SOURCE = "vllm/v1/kv_cache_interface.py:643-648 (AttentionSpec.max_memory_usage_bytes)"
MAMBA_BLOCKS_PER_REQUEST = Fact({"align": 2, "none": 1}, "vllm/v1/kv_cache_interface.py:1135-1141 "
                                                           "(MambaSpec.max_memory_usage_bytes)")
# "GPU KV cache size: N tokens, Maximum concurrency for L tokens per request: X": X = num_blocks / the
# blocks one request of max_model_len holds over all groups; N = int(X x max_model_len).
CAPACITY_SOURCE = "vllm/v1/core/kv_cache_utils.py:1061-1093 (get_max_concurrency_for_kv_cache_config), :1120-1128, :1147-1154"
# With mamba_cache_mode align, Mamba states are cached at the attention block's boundaries.
MAMBA_BLOCK_SIZE_SOURCE = "vllm/platforms/interface.py:1114-1115"
MAX_MODEL_LEN_SOURCE = "vllm/config/model.py:2545 (_get_and_verify_max_len: the config's max_position_embeddings)"


# --- pipeline parallelism --------------------------------------------------------------------------
PP_SPLIT_SOURCE = "vllm/distributed/utils.py:198-240 (get_pp_indices; VLLM_PP_LAYER_PARTITION overrides it)"
# A rank with no attention layer returns before the hybrid alignment: its Mamba groups keep the
# default block (vllm issue #51752); the KV offloading connector then stops on the mismatch.
PP_NO_ATTENTION_SOURCE = "vllm/platforms/interface.py:762-764 (update_block_size_for_backend); vllm issue #51752"
PP_NO_ATTENTION_MESSAGE = ("AssertionError: tokens_per_block={block} not divisible by tokens_per_hash={hash}. Hybrid "
                           "models (e.g. Mamba+Attention) need --enable-prefix-caching to align block sizes.")
PP_NO_ATTENTION_MESSAGE_SOURCE = "vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py:113-118"


def pp_ranges(num_layers: int, pp: int) -> list[tuple[int, int]]:
    """[start, end) of each PP rank's layers, as vLLM splits them: even, and the remainder one layer each
    to the stages before the last, from the second-to-last backwards (not SGLang's split)."""
    partitions = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        partitions[-i] += 1
    starts = [sum(partitions[:r]) for r in range(pp)]
    return [(a, a + n) for a, n in zip(starts, partitions)]


# --- what changed between releases (read from each wheel: tools/vllm_facts.py RELEASE --find) ------
# (first release read with this value, value, where). A release between two reads takes the earlier
# read's value, as the SGLang profiles do.
# The block vLLM starts from without --block-size (CacheConfig.DEFAULT_BLOCK_SIZE, passed to each backend's
# get_preferred_block_size and used as the least hybrid alignment: platforms/interface.py:772-779, :1068-1074
# in 0.33.0; :782-789, :1080-1086 in 0.34.0).
DEFAULT_BLOCK_SIZE_BY_RELEASE = (
    (release("0.10.0"), 16, "vllm/config/cache.py:185, :462-463 (0.33.0)"),
    (release("0.34.0"), 64, "vllm/config/cache.py:185, :488-489 (0.34.0)"),
)
GPU_MEMORY_UTILIZATION_BY_RELEASE = (
    (release("0.10.0"), 0.9, "vllm/config/cache.py:42 (0.10.2), :41 (0.19.0)"),
    (release("0.20.0"), 0.92, "vllm/config/cache.py:66 (0.20.0), :215 (0.33.0)"),
)
# On an x86 CPU without Triton (triton-cpu) 0.33.0 only warns ("Triton is not installed. triton-cpu is expected
# on x86 CPUs.", platforms/cpu.py:239-244); from 0.34.0 the platform's config check raises (cpu.py:239-243).
CPU_TRITON_REQUIRED_SINCE = Fact(release("0.34.0"), "vllm/platforms/cpu.py:239-243 (0.34.0); :239-244 warns in 0.33.0")
CPU_TRITON_MESSAGE = "vLLM on x86 CPUs requires Triton (triton-cpu)."
# `max_num_seqs (N) exceeds available Mamba cache blocks (M)` stops graph capture from 0.20.0 on.
MAX_SEQS_CHECK_SINCE = Fact(release("0.20.0"), "vllm/config/compilation.py:1436 (0.20.0), :1526 (0.33.0); absent in 0.19.0")
# mamba_cache_mode (align: 2 blocks per Mamba group) exists from 0.15.0; before it a request held one
# Mamba block per group.
MAMBA_CACHE_MODE_SINCE = Fact(release("0.15.0"), "vllm/config/cache.py:127 (0.15.0); absent in 0.14.0")

# No per-layer tensor dump in any release read (0.11.0, 0.33.0, 0.34.0): the only "dump" setting,
# VLLM_DEBUG_DUMP_PATH / compilation_config.debug_dump_path, writes torch.compile's fx graphs, not
# tensors, and no module saves its outputs (the only forward hook outside profiling substitutes
# router logits in benchmarks/forward/routing.py). The pull requests that would add one (#21215
# "intermediate logging", #36576 VLLM_DEBUG_TENSOR_DUMP_OUTPUT_FOLDER) were closed unmerged.
TENSOR_DUMP = Fact(None, "vLLM 0.11.0-0.34.0 write no per-layer tensor dumps: VLLM_DEBUG_DUMP_PATH dumps fx graphs "
                         "(vllm/envs.py:786 in 0.33.0, :829 in 0.34.0; config/compilation.py:446 debug_dump_path in "
                         "0.33.0, :164 in 0.11.0)")


def default_block_size(version) -> Fact:
    """CacheConfig.DEFAULT_BLOCK_SIZE of `version` (a Version), with where it was read."""
    return Fact(*by_release(DEFAULT_BLOCK_SIZE_BY_RELEASE, version))


def by_release(table, version) -> tuple[object, str]:
    """(value, where) of a by-release table for `version` (a Version): the newest read at or before it."""
    value, where = table[0][1], table[0][2]
    for since, v, w in table:
        if version >= since:
            value, where = v, w
    return value, where
