"""vLLM's own wording for the hybrid failures (read from vLLM 0.33.0's released source; file:line
beside each). Lines reach these patterns with vLLM's `(EngineCore_DP0 pid=..) ERROR .. [file:line]`
prefix already stripped (prefixes.py)."""

from __future__ import annotations

from .pattern import Pattern

VLLM: tuple[Pattern, ...] = (
    Pattern(
        "VLLM_ENGINE_CORE_FAILED", "vllm", "info",
        r"EngineCore failed to start|Engine core initialization failed",
        "vLLM's engine core failed to start",
        "vLLM's engine core process stopped during start-up; its own traceback (printed with the same "
        "`(EngineCore_DP0 pid=...)` prefix) holds the cause.",
        "See the other findings of this log: they name what stopped it.",
        source="vllm 0.33.0 v1/engine/core.py:1584; v1/engine/utils.py:1474",
    ),
    Pattern(
        "VLLM_MAX_SEQS_ABOVE_MAMBA_BLOCKS", "vllm", "error",
        r"max_num_seqs \((?P<seqs>\d+)\) exceeds available Mamba cache blocks \((?P<blocks>\d+)\)",
        "max_num_seqs {seqs} is above the {blocks} Mamba cache blocks",
        "Each decoding sequence holds one Mamba cache block, and only {blocks} fit in the memory left after the "
        "weights; full CUDA/XPU graph capture for {seqs} sequences cannot proceed.",
        "Pass --max-num-seqs {blocks} (or less), raise --gpu-memory-utilization, or shorten --max-model-len.",
        source="vllm 0.33.0 config/compilation.py:1517-1531 (vllm #34094)",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "VLLM_NO_CACHE_MEMORY", "vllm", "error",
        r"No available memory for the cache blocks",
        "No memory left for vLLM's cache blocks",
        "After the weights and the profiling run's activations, nothing of --gpu-memory-utilization was left for "
        "the KV and Mamba cache blocks.",
        "Raise --gpu-memory-utilization, shard with --tensor-parallel-size / --pipeline-parallel-size, or use a "
        "device with more memory (bringup plan shows the split).",
        source="vllm 0.33.0 v1/core/kv_cache_planning.py:56-64",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "VLLM_KV_TOO_SMALL_FOR_MAX_LEN", "vllm", "error",
        r"To serve at least one request with the model's max seq len \((?P<max_len>\d+)\), \((?P<need>[\d.]+) GiB KV "
        r"cache is needed, which is larger than the available KV cache memory \((?P<have>[\d.]+) GiB\)",
        "One {max_len}-token request needs {need} GiB of KV cache; {have} GiB are free",
        "vLLM checks that one request of --max-model-len tokens fits in the cache; with {have} GiB left it does not.",
        "Lower --max-model-len (the message suggests the largest that fits), raise --gpu-memory-utilization, or shard.",
        source="vllm 0.33.0 v1/core/kv_cache_planning.py:75-85",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "VLLM_BLOCK_SIZE_RAISED", "vllm", "info",
        r"(?P<xpu>\[XPU\])?Setting attention block size to (?P<block>\d+) tokens "
        r"(?:to ensure that attention page size is >= mamba page size|to ensure multiple of (?P<multiple>\d+))",
        "Attention block size raised to {block} tokens",
        "vLLM keeps one page size for attention and Mamba groups (the hybrid KV cache manager), so the attention "
        "block grows until a page holds one Mamba state[[ (XPU: then rounded up to a multiple of {multiple} for "
        "the GDN kernel)]]. Prefix caching and the scheduler work in {block}-token blocks.",
        "Nothing to change unless prefix caching granularity matters; --block-size only raises it further.",
        source="vllm 0.33.0 platforms/interface.py:1105-1112 (update_block_size_for_backend); platforms/xpu.py:517-521",
    ),
    Pattern(
        "VLLM_MAMBA_PAGE_PADDED", "vllm", "info",
        r"Padding mamba page size by (?P<pct>[\d.]+)% to ensure that mamba page size and attention page size are exactly equal",
        "Mamba page padded by {pct}%",
        "Each Mamba state block is padded by {pct}% so that it is exactly one attention page; that share of the "
        "Mamba cache is unused memory.",
        "Nothing to fix; a larger --block-size makes the attention page larger and the padding different.",
        source="vllm 0.33.0 platforms/interface.py:1120-1138",
    ),
    Pattern(
        "VLLM_MAMBA_CACHE_MODE_NONE", "vllm", "warning",
        r"Mamba cache mode is set to 'none' when prefix caching is disabled",
        "mamba_cache_mode forced to 'none'",
        "With prefix caching off, vLLM keeps no Mamba prefix states, so --mamba-cache-mode align was dropped.",
        "Enable prefix caching (and chunked prefill) if you meant to cache Mamba prefixes.",
        source="vllm 0.33.0 model_executor/models/config.py:780-784",
    ),
    Pattern(
        "VLLM_MAMBA_PREFIX_NEEDS_CHUNKED", "vllm", "error",
        r"Chunked prefill is required for Mamba prefix caching",
        "Mamba prefix caching needs chunked prefill",
        "With prefix caching on, vLLM caches Mamba states at block boundaries (mamba_cache_mode align), which "
        "needs the scheduler to split prefills into blocks.",
        "Drop --no-enable-chunked-prefill, or pass --no-enable-prefix-caching.",
        source="vllm 0.33.0 model_executor/models/config.py:772-774",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "VLLM_HMA_FORCED_UNSUPPORTED", "vllm", "error",
        r"Hybrid KV cache manager was explicitly enabled but is not supported in this configuration",
        "The hybrid KV cache manager is not available here",
        "Hybrid Mamba models need vLLM's hybrid KV cache manager (one pool, attention and Mamba groups of equal "
        "page size); this platform or connector cannot run it.",
        "Run on CUDA, ROCm, XPU or CPU (the platforms with support_hybrid_kv_cache), and without a KV connector that "
        "lacks HMA.",
        source="vllm 0.33.0 config/vllm.py:2281-2289; platforms/cuda.py:683, rocm.py:1389, xpu.py:535, cpu.py:649",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "VLLM_INVALID_ATTENTION_BACKEND", "vllm", "error",
        r"Invalid attention backend for (?P<dev>\w+), with use_mla: (?P<mla>\w+)",
        "vLLM on {dev} does not have the attention backend asked for",
        "--attention-backend names a backend the {dev} platform does not implement; on XPU vLLM runs FLASH_ATTN "
        "(the default) or TRITON_ATTN (use_mla: {mla}).",
        "Drop --attention-backend, or pass TRITON_ATTN / FLASH_ATTN on XPU (SGLang's intel_xpu is not a vLLM backend).",
        source="vllm 0.33.0 platforms/xpu.py:264-268",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "VLLM_DTYPE_FLOAT16", "vllm", "error",
        r"The model type '(?P<model_type>[\w.-]+)' does not support float16",
        "vLLM refuses float16 for {model_type}",
        "vLLM's ModelConfig refuses float16 for {model_type} models (numerical instability) before anything loads.",
        "Pass --dtype bfloat16 (or float32), or leave --dtype auto.",
        source="vllm 0.33.0 config/model.py:2398-2420",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "VLLM_CPU_TRITON", "vllm", "error",
        r"vLLM on x86 CPUs requires Triton \(triton-cpu\)",
        "vLLM needs Triton for CPUs (triton-cpu) on this x86 host",
        "From 0.34.0 vLLM's CPU platform stops before anything loads on an x86 CPU whose environment has no Triton; "
        "0.33.0 only warned.",
        "Install triton-cpu into vLLM's environment, or run a vLLM release that carries it.",
        source="vllm 0.34.0 platforms/cpu.py:239-243",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "VLLM_NO_ATTENTION_BACKEND", "vllm", "error",
        r"No valid attention backend found for (?P<dev>\w+) with AttentionSelectorConfig\(head_size=(?P<head>\d+), "
        r"dtype=torch\.(?P<dtype>\w+)",
        "No vLLM attention backend on {dev} takes this model in {dtype}",
        "vLLM's selector found no attention backend for head size {head} in {dtype} on {dev} (CUDA's MLA backends, "
        "for one, run float16/bfloat16 only); the reasons follow in the message.",
        "Pass --dtype bfloat16 (or another dtype the message's reasons allow).",
        source="vllm 0.33.0 platforms/cuda.py:452-475; v1/attention/backends/mla/triton_mla.py:100",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "VLLM_ATTENTION_BACKEND_INVALID", "vllm", "error",
        r"Selected backend AttentionBackendEnum\.(?P<backend>\w+) is not valid for this configuration\. "
        r"Reason: (?P<reason>.+)",
        "vLLM cannot run the asked --attention-backend {backend} here",
        "The {backend} backend's own check refused this device or model: {reason}",
        "Drop --attention-backend to let vLLM choose, or ask for another backend (FlashMLA dense: Hopper only).",
        source="vllm 0.33.0 platforms/cuda.py:430-445; v1/attention/ops/flashmla.py:50-58",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "VLLM_PADDING_LAYERS", "vllm", "info",
        r"Add (?P<n>\d+) padding layers, may waste at most (?P<pct>[\d.]+)% KV cache memory",
        "{n} padding layers in vLLM's KV cache groups",
        "vLLM groups the layers of each kind (attention, Mamba) into groups of one size; a kind whose layer count "
        "is not a multiple of it gets {n} empty layers, up to {pct}% of the pool that holds nothing.",
        "Nothing to fix; it is the price of one block pool for all groups (bringup validate --target vllm shows the groups).",
        source="vllm 0.33.0 v1/core/kv_cache_planning.py:533-541",
    ),
    Pattern(
        "VLLM_BLOCK_SIZES_NOT_ALIGNED", "vllm", "error",
        r"tokens_per_block=(?P<block>\d+) not divisible by tokens_per_hash=(?P<hash>\d+)",
        "KV cache groups with block sizes that do not align ({block} and {hash} tokens)",
        "The KV offloading connector needs every cache group's block to be a multiple of the hashing unit "
        "({hash} tokens); one group kept {block}. The message blames prefix caching, and that is one cause (a "
        "hybrid without it never aligns its blocks). The other cause is a pipeline stage that holds no attention "
        "layer: vLLM aligns the Mamba page to the attention block only on ranks that have an attention layer "
        "(update_block_size_for_backend returns early on the others), so that stage's Mamba groups keep the "
        "default block.",
        "Pass --block-size with the aligned attention block on every stage (bringup validate --target vllm==X "
        "prints it as the resolved page size), or pick a --pipeline-parallel-size that leaves an attention layer "
        "on every stage; keep --enable-prefix-caching on.",
        source="vllm 0.33.0 distributed/kv_transfer/kv_connector/v1/offloading/config.py:113-118; "
               "platforms/interface.py:762-764; vllm issue #51752 (reproduced on 0.27.0)",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
)
