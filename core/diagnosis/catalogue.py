"""The catalogue: failures engineers meet in bring-up logs, as data.

Wording comes from the sources in ../shared/reference/sglang-notes.md (SGLang 0.5.15-0.5.23: the
old `server_args.py` wording and the newer `arg_groups/` wording), our engine's own errors
(core/engine/pools.py, scheduler.py, engine.py), and the texts torch and transformers raise.
Order matters only for reading; every pattern is tried on every line.
"""

from __future__ import annotations

from dataclasses import replace

from bringup.core.rules.profiles import PROFILES, versions_where

from .pattern import Pattern


def _printing(text: str) -> str:
    """The profiled releases whose source holds this message text (read from their wheels)."""
    def messages(p):
        return (p.extra_buffer_platform_message, *p.no_buffer_messages, p.intel_xpu_page_message,
                p.intel_xpu_page_message_mla)
    return versions_where(lambda p: any(text in m for m in messages(p)))


_RANGE = f"{PROFILES[0].label} to {PROFILES[-1].label}"
_TRITON_FIXED = versions_where(lambda p: not p.triton_probes_layer0)  # "0.5.18 and later"
_TRITON_PROBES = versions_where(lambda p: p.triton_probes_layer0)  # "0.5.17 only"
_XPU_REFUSED = versions_where(lambda p: p.extra_buffer_refused_on_xpu)  # "0.5.20 and later"
def _triton_refusing(arch: str) -> str:
    return versions_where(lambda p: p.triton_refusal(arch) is not None)


_CONV1D_ON_XPU = versions_where(lambda p: p.xpu_causal_conv1d_bound)  # "0.5.17 and later"
_NEMOTRON_TRITON_REFUSED = _triton_refusing("NemotronHForCausalLM")  # "0.5.17 or 0.5.18"
_XPU_EXTRA_BUFFER = versions_where(lambda p: "xpu" in p.extra_buffer_platforms and not p.extra_buffer_refused_on_xpu)

_IDS = r"(?P<valid>[\d,\s]*)"
_XPU_HINT = (r"device='?xpu|--device xpu|on XPU|xpu:\d|torch\.xpu", "On XPU, --attention-backend intel_xpu reads the "
             "head size from the layer itself and never probes layer 0.")
_NO_BUFFER_FIX = ("Use --mamba-radix-cache-strategy no_buffer with --disable-overlap-schedule and page size 1, or "
                  "--disable-radix-cache (the known-good XPU recipe of PR #24390)")

SGLANG: tuple[Pattern, ...] = (
    Pattern(
        "LAYER_NOT_IN_FULL_ATTENTION", "sglang", "error",
        r"layer_id=(?P<layer>\d+) not in full attention layers: dict_keys\(\[" + _IDS + r"\]\)",
        "Layer {layer} is not in the KV pool",
        "Something asked SGLang's hybrid KV pool for layer {layer}, but that pool stores K and V only for the "
        "model's full-attention layers [{valid}]. An attention backend that reads the head size from layer 0 "
        "(triton before PR #32227, wave still) crashes this way on any hybrid whose layer 0 is not attention.",
        "Use an attention backend that asks the pool for its head size (get_v_head_dim()) instead of probing "
        f"layer 0; sglang {_TRITON_FIXED} do so for triton (PR #32227).",
        source="sglang PR #32227; #22605 / #23080 (Granite-4.0-h); mem_cache/memory_pool.py _transfer_full_attention_id",
        kind="layer",
        versions=f"{_TRITON_PROBES} with triton (and releases before it); with wave, every release to {PROFILES[-1].label}",
        hints=(
            (r"wave_backend\.py|attention_backend='?wave|--attention-backend wave",
             "The wave backend (ROCm) still calls get_value_buffer(0) in 0.5.23: use --attention-backend aiter or triton."),
            (r"triton_backend\.py|attention_backend='?triton",
             f"This log ran the triton backend: upgrade sglang to {_TRITON_FIXED} (PR #32227)."),
            _XPU_HINT,
        ),
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='not in full attention layers',
    ),
    Pattern(
        "PP_VALUE_BUFFER_INDEX", "sglang", "error",
        r"IndexError: list index out of range",
        "A pipeline stage asked for a layer it does not hold",
        "The attention backend on a PP stage after the first asked the KV pool for layer 0 "
        "(get_value_buffer(0)); that stage's pool starts at a later layer.",
        "Upgrade sglang (PR #30340 reads the value buffer at the stage's start layer), or run without --pp-size.",
        source="sglang PR #30340",
        near=r"get_value_buffer|get_key_buffer",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "MISSING_GET_V_HEAD_DIM", "sglang", "error",
        r"AttributeError: '(?P<cls>\w+)' object has no attribute 'get_v_head_dim'",
        "The KV pool {cls} has no get_v_head_dim()",
        "An attention backend from after PR #32227 asks the KV pool for its value head size through "
        "get_v_head_dim(), which {cls} does not have: sglang's files are from two versions, or an out-of-tree "
        "pool class predates the method.",
        "Reinstall one sglang version throughout (pip install --force-reinstall sglang==X.Y.Z); an out-of-tree "
        "pool must implement get_v_head_dim().",
        source="sglang PR #32227 (MHATokenToKVPool.get_v_head_dim); #26688 (hasattr duck-typing)",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "EXTRA_BUFFER_PLATFORM", "sglang", "error",
        r"extra_buffer needs (?P<platforms>[A-Za-z/]+) \(FLA\)",
        "extra_buffer refused on this device",
        "This sglang allows the mamba extra_buffer strategy only on {platforms} (the old platform check). On XPU "
        "with sglang 0.5.17 the auto strategy picks extra_buffer and then fails here: error 1 of PR #32227. The "
        "kernels are Triton, so this is a coverage gap, not a missing kernel.",
        _NO_BUFFER_FIX + f"; sglang {_XPU_EXTRA_BUFFER} run extra_buffer on XPU ({_XPU_REFUSED} refuse it there "
        "again, and auto picks no_buffer).",
        source="sglang PR #32227; validate_mamba_extra_buffer (server_args.py in 0.5.17 and 0.5.18, "
               "arg_groups/mamba_hook.py from 0.5.19)",
        versions=f"a release before {PROFILES[0].label} or a fork (no profiled release prints this platform list)",
        versions_by=(
            (r"needs CUDA/MUSA/NPU/ROCm \(FLA\)", _printing("extra_buffer needs CUDA/MUSA/NPU/ROCm (FLA)")),
            (r"needs CUDA/MUSA/NPU/ROCm/XPU \(FLA\)", _printing("extra_buffer needs CUDA/MUSA/NPU/ROCm/XPU (FLA)")),
        ),
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "EXTRA_BUFFER_PLATFORM", "sglang", "error",
        r"extra_buffer requires platform support for Mamba cache state snapshots",
        "extra_buffer refused on this device",
        "The mamba extra_buffer strategy needs state snapshots, which sglang allows on CUDA, MUSA, NPU, ROCm and "
        "XPU only; CPU, MPS and MLX fail here (arg_groups/mamba_hook.py _platform_supports_mamba_cache_extra_buffer).",
        _NO_BUFFER_FIX + ".",
        source="sglang arg_groups/mamba_hook.py validate_mamba_extra_buffer; #29391",
        versions=_printing("extra_buffer requires platform support for Mamba cache state snapshots"),
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "EXTRA_BUFFER_UNSUPPORTED", "sglang", "error",
        r"extra_buffer is not supported for (?P<arch>\S+?);? use no_buffer",
        "extra_buffer is not supported for {arch} here",
        "sglang refuses the mamba extra_buffer strategy for {arch} in this setup: the architecture is not in "
        f"its extra-buffer list, the linear-attention backend is not triton, or (sglang {_XPU_REFUSED}) the device "
        "is XPU.",
        _NO_BUFFER_FIX + f". On XPU, only sglang {_XPU_EXTRA_BUFFER} run extra_buffer; with {_XPU_REFUSED} use "
        "no_buffer with --disable-overlap-schedule (what auto picks there).",
        source="sglang arg_groups/overrides.py supports_mamba_cache_extra_buffer",
        versions=f"every release {_RANGE}; for an XPU launch, {_XPU_REFUSED}",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='extra_buffer is not supported for ',
    ),
    Pattern(
        "EXTRA_BUFFER_SPECULATIVE", "sglang", "error",
        r"extra_buffer for (?P<arch>\S+) does not support speculative decoding",
        "extra_buffer with speculative decoding refused for {arch}",
        "This sglang build does not combine the extra_buffer strategy with speculative decoding for {arch}.",
        "Use --mamba-radix-cache-strategy no_buffer, or drop speculative decoding.",
        source="sglang server_args.py (an intermediate build)",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='does not support speculative decoding; use',
    ),
    Pattern(
        "STRATEGY_NEEDS_MAMBA", "sglang", "error",
        r"--mamba-radix-cache-strategy (?P<strategy>\S+) needs mamba state, got (?P<arch>[^.\s]+)",
        "{strategy} given for a model without mamba state",
        "{arch} keeps no recurrent state, so a mamba radix-cache strategy means nothing for it; older builds "
        "crashed at decode instead ('NoneType' object is not subscriptable, #39430).",
        "Drop --mamba-radix-cache-strategy for this model.",
        source="sglang arg_groups/model_hook.py handle_mamba_radix_cache; #39430",
        versions=versions_where(lambda p: p.rejects_strategy_without_mamba),
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "NO_BUFFER_PAGE_SIZE", "sglang", "error",
        r"no_buffer only supports page_size=1",
        "no_buffer needs page size 1",
        "The no_buffer mamba strategy works only with page size 1. On XPU this is the ordering trap: "
        "--page-size 64/128 (what intel_xpu needs) meets no_buffer, which auto chose because XPU refuses extra_buffer.",
        "Use --disable-radix-cache (then the strategy does not apply and intel_xpu may use page 64/128), "
        "or --page-size 1 with a backend that allows it.",
        source="sglang arg_groups/mamba_hook.py validate_mamba_no_buffer; sglang-notes §3.3",
        versions=_printing("no_buffer only supports page_size=1."),
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "NO_BUFFER_OVERLAP", "sglang", "error",
        r"no_buffer do not support overlap schedule",
        "no_buffer needs the overlap scheduler off",
        "The no_buffer mamba strategy cannot run with the overlap scheduler, which is on by default. A fallback "
        "to no_buffer that forgets to turn overlap off ends here (#29158).",
        "Add --disable-overlap-schedule, or use --disable-radix-cache.",
        source="sglang validate_mamba_no_buffer; #29158",
        versions=_printing("no_buffer do not support overlap schedule."),
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "NO_BUFFER_TRTLLM", "sglang", "error",
        r"no_buffer do not support trtllm_mha attention backend",
        "no_buffer does not work with trtllm_mha",
        "The no_buffer mamba strategy is incompatible with the trtllm_mha attention backend.",
        "Use --mamba-radix-cache-strategy extra_buffer, another attention backend, or --disable-radix-cache.",
        source="sglang validate_mamba_no_buffer",
        versions=_printing("no_buffer do not support trtllm_mha attention backend."),
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "LAZY_NEEDS_OVERLAP", "sglang", "error",
        r"Lazy extra buffer requires overlap schedule",
        "extra_buffer_lazy needs the overlap scheduler",
        "extra_buffer_lazy allocates its second track slot on demand and relies on the overlap scheduler.",
        "Remove --disable-overlap-schedule, or use --mamba-radix-cache-strategy extra_buffer.",
        source="sglang #27118",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='Lazy extra buffer requires overlap schedule',
    ),
    Pattern(
        "LAZY_UNDER_PD", "sglang", "error",
        r"extra_buffer_lazy unsupported (?:under PD disaggregation|with (?P<algo>\S+))",
        "extra_buffer_lazy is not available in this mode",
        "extra_buffer_lazy cannot run under PD disaggregation (or with this speculative algorithm).",
        "Use --mamba-radix-cache-strategy extra_buffer.",
        source="sglang validate_mamba_extra_buffer",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='extra_buffer_lazy unsupported under PD disaggregation',
    ),
    Pattern(
        "CHUNK_PAGE_DIVISIBLE", "sglang", "error",
        r"either chunk_size or page_size must be divisible by the other, got chunk_size=(?P<chunk>\d+), page_size=(?P<page>\d+)",
        "Mamba chunk size {chunk} and page size {page} do not divide",
        "With extra_buffer, mamba state snapshots are taken at multiples of max(chunk size, page size), so one "
        "must divide the other.",
        "Pick a --page-size that divides {chunk} or is a multiple of it (e.g. 64 or 128).",
        source="sglang validate_mamba_extra_buffer (mamba_cache_chunk_size)",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='either chunk_size or page_size must be divisible by the other',
    ),
    Pattern(
        "CHUNKED_PREFILL_PAGE", "sglang", "error",
        r"chunked_prefill_size must be divisible by page_size",
        "Chunked prefill size is not a whole number of pages",
        "The chunked prefill size must be a multiple of the KV page size (which a backend may have changed).",
        "Set --chunked-prefill-size to a multiple of the page size, e.g. 8192 with page 64 or 128.",
        source="sglang server args",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='chunked_prefill_size must be divisible by page_size',
    ),
    Pattern(
        "TRITON_FIRST_LAYER_NOT_ATTENTION", "sglang", "error",
        r"(?P<arch>\S+) does not support triton attention backend, ?as the first layer might not be an attention layer",
        "{arch} refuses the triton attention backend",
        "Layer 0 of {arch} is not an attention layer, and the triton backend would read its head size there. "
        "The check runs before the default backend is filled in, so only an explicit --attention-backend triton "
        "meets it; on XPU triton is the default, so LFM2 on XPU needs an explicit other backend.",
        "Pass --attention-backend intel_xpu on XPU (flashinfer or torch_native elsewhere). For NemotronH, "
        f"sglang {_NEMOTRON_TRITON_REFUSED} refuse an explicit triton but run the default one; later releases "
        "accept it.",
        source="sglang model-specific adjustments (server_args.py up to 0.5.18, arg_groups/model_hook.py later)",
        versions=_triton_refusing("Lfm2ForCausalLM"),
        versions_by=((r"NemotronH\w*ForCausalLM does not support", _NEMOTRON_TRITON_REFUSED),),
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "UNKNOWN_HYBRID", "sglang", "error",
        r"Expected hybrid GDN or NemotronH models, but got unknown model",
        "sglang does not know this hybrid",
        "The model has linear-attention or mamba layers, but no sglang hybrid detector claims it, so no linear "
        "attention backend can be chosen.",
        "Register it with register_linear_attn_model(LinearAttnModelSpec(...)), or use a supported architecture.",
        source="sglang layers/attention/attention_registry.py",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='Expected hybrid GDN or NemotronH models, but got unknown model',
    ),
    Pattern(
        "SHORT_CONV_NPU", "sglang", "error",
        r"Short-conv hybrid models .*are not yet supported on NPU",
        "Short-conv hybrids do not run on NPU",
        "LFM2, LFM2-MoE and ZAYA1 use the short-conv backend, which has no NPU version.",
        "Run on CUDA, XPU or ROCm.",
        source="sglang ShortConvAttnBackend",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='are not yet supported on NPU',
    ),
    Pattern(
        "GDN_BLACKWELL_BACKEND", "sglang", "error",
        r"Only (?P<allowed>.+?) backends are supported on Blackwell GPUs for hybrid GDN models",
        "Attention backend not allowed for GDN hybrids on Blackwell",
        "On Blackwell, hybrid GDN models (Qwen3-Next, Qwen3.5) run only with {allowed}.",
        "Pick one of {allowed} with --attention-backend.",
        source="sglang model overrides",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='backends are supported on Blackwell GPUs for hybrid GDN models',
    ),
    Pattern(
        "LINEAR_ATTN_INTEL_XPU", "sglang", "error",
        r"--linear-attn-backend intel_xpu requires (?P<what>.+)",
        "--linear-attn-backend intel_xpu cannot run here",
        "The intel_xpu linear-attention backend needs {what}.",
        "Use --linear-attn-backend triton (the portable default), or install an sgl-kernel-xpu with gdn_attention on XPU.",
        source="sglang XpuGDNAttnBackend",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='--linear-attn-backend intel_xpu requires',
    ),
    Pattern(
        "SAMPLING_BACKEND_XPU", "sglang", "error",
        r"--sampling-backend intel_xpu requires --device xpu, got --device (?P<dev>\S+)",
        "intel_xpu sampling needs --device xpu",
        "The intel_xpu sampling backend runs only on XPU; this launch uses {dev}.",
        "Drop --sampling-backend intel_xpu, or launch with --device xpu.",
        source="sglang arg_groups/platform_hook.py",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='--sampling-backend intel_xpu requires --device xpu',
    ),
    Pattern(
        "WEIGHTS_LEAVE_NO_KV", "sglang", "error",
        r"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=(?P<fraction>[\d.]+)\. "
        r"Raise --mem-fraction-static above (?P<need>[\d.]+)",
        "The weights fill the static memory budget",
        "With --mem-fraction-static={fraction} the weights alone use the whole static budget, so nothing is left "
        "for the KV cache or the mamba state.",
        "Raise --mem-fraction-static above {need}, shard the weights with --tp-size/--pp-size, or use a device "
        "with more memory (bringup plan shows the split).",
        source="sglang mem_cache/kv_cache_configurator.py _profile_available_bytes",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='Loaded weights leave no GPU memory for the KV cache',
    ),
    Pattern(
        "STATE_CACHE_NO_MEMORY", "sglang", "error",
        r"Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache\. Computed "
        r"max_mamba_cache_size=(?P<slots>-?\d+) \(total_rest_memory=(?P<rest>[\d.]+) GB, mamba_cache_per_req=(?P<per>[\d.]+) MB\)",
        "No room for the mamba state cache",
        "After the weights, {rest} GB were left; the mamba share of it holds {slots} state slots of {per} MB "
        "each, which is not enough to run.",
        "Reduce --max-running-requests, raise --mem-fraction-static, halve the state with --mamba-ssm-dtype "
        "bfloat16, or use a device with more memory.",
        source="sglang kv_cache_configurator._handle_max_mamba_cache",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='Not enough GPU memory for hybrid (mamba/linear-attention) state cache',
    ),
    Pattern(
        "STATE_CACHE_TOO_SMALL", "sglang", "error",
        r"Hybrid \(mamba/linear-attention\) state cache is too small to serve any requests",
        "The mamba state cache cannot hold one request",
        "Each running request holds several state slots (3 with no_buffer, 4-5 with extra_buffer), and the "
        "pool has fewer than that.",
        "Raise --mem-fraction-static or --mamba-full-memory-ratio, set --max-mamba-cache-size, or use "
        "--disable-radix-cache (one slot per request).",
        source="sglang resolve_max_num_reqs",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='Hybrid (mamba/linear-attention) state cache is too small to serve ',
    ),
    Pattern(
        "MAMBA_SLOTS_EXHAUSTED", "sglang", "error",
        r"Not enough space for mamba cache, try to increase --mamba-full-memory-ratio or --max-mamba-cache-size",
        "The mamba state pool ran out of slots",
        "A request needed a state slot and none was free (the runtime assert in HybridReqToTokenPool). Radix "
        "snapshots and extra_buffer track slots share the same pool.",
        "Raise --mamba-full-memory-ratio or --max-mamba-cache-size, or lower --max-running-requests.",
        source="sglang HybridReqToTokenPool.alloc; #37066",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='Not enough space for mamba cache, try to increase',
    ),
    Pattern(
        "MAMBA_PING_PONG_EXHAUSTED", "sglang", "error",
        r"Not enough space for mamba ping pong idx",
        "No free track slots for extra_buffer",
        "extra_buffer holds a ping-pong pair of track slots per request, and the pool had none left.",
        "Raise --mamba-full-memory-ratio, or use --mamba-radix-cache-strategy no_buffer / extra_buffer_lazy.",
        source="sglang HybridReqToTokenPool",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='Not enough space for mamba ping pong idx',
    ),
    Pattern(
        "MAX_RUNNING_CAPPED_BY_STATE", "sglang", "warning",
        r"max_running_requests is capped to (?P<running>\d+) by the mamba state cache \(max_mamba_cache_size=(?P<slots>\d+), "
        r"(?P<ratio>\d+) state slots per request\)",
        "Concurrency capped at {running} by the mamba state cache",
        "The state pool has {slots} slots and each running request holds {ratio}, so at most {running} requests "
        "run at once whatever the KV cache could hold.",
        "Raise --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state with --mamba-ssm-dtype bfloat16.",
        source="sglang resolve_max_num_reqs",
        source_text='max_running_requests is capped to %d by the mamba state ',
    ),
    Pattern(
        "MAX_RUNNING_REDUCED", "sglang", "warning",
        r"max_running_requests was reduced from the requested (?P<asked>\d+) to (?P<got>\d+)",
        "max_running_requests reduced from {asked} to {got}",
        "The pools cannot hold {asked} running requests; sglang lowered the limit to {got}.",
        "Give the pools more memory (--mem-fraction-static) or ask for fewer running requests.",
        source="sglang resolve_max_num_reqs",
        source_text='max_running_requests was reduced from the requested',
    ),
    Pattern(
        "PAGE_SIZE_CHANGED", "sglang", "warning",
        r"(?P<backend>.+?) only supports page_sizes? of \[(?P<allowed>[\d,\s]+)\], changing page_size from (?P<old>\d+) to (?P<new>\d+)",
        "Page size changed from {old} to {new}",
        "{backend} supports page sizes [{allowed}] only, so sglang moved the page size to {new}. With the radix "
        "cache on, a hybrid's no_buffer strategy needs page size 1, so this can break it later.",
        "Pass --page-size {new} yourself, and on hybrids use --disable-radix-cache with intel_xpu.",
        source="sglang _intel_xpu_page_constraint; sglang-notes §3.3",
        versions=_printing("Intel XPU attention backend only supports page_sizes of [64, 128]"),
        versions_by=(
            (r"for MLA Decode only supports", _printing("Intel XPU attention backend for MLA Decode only supports")),
            (r"for MLA only supports", _printing("Intel XPU attention backend for MLA only supports")),
        ),
    ),
    Pattern(
        "XMX_FALLBACK", "sglang", "warning",
        r"does not support Intel XMX, will fallback to triton backend",
        "intel_xpu fell back to triton",
        "This XPU has no XMX units, so the intel_xpu attention backend is replaced by triton.",
        f"Expect triton's speed; in sglang {_TRITON_PROBES}, triton on a Mamba2 hybrid probes layer 0 "
        f"(upgrade to {_TRITON_FIXED}).",
        source="sglang layers/attention/xpu_backend.py",
        source_text='does not support Intel XMX, will fallback to triton backend',
    ),
    Pattern(
        "MAX_TOTAL_TOKENS_TOO_LARGE", "sglang", "warning",
        r"max_total_tokens=(?P<asked>\d+) is larger than the profiled value",
        "--max-total-tokens is larger than what fits",
        "The KV pool was profiled smaller than --max-total-tokens={asked}; sglang uses the profiled value.",
        "Lower --max-total-tokens, or give the pool more memory.",
        source="sglang DefaultPoolConfigurator",
        source_text='is larger than the profiled value',
    ),
    Pattern(
        "INVALID_SSM_DTYPE", "sglang", "warning",
        r"Invalid mamba_ssm_dtype '(?P<dtype>[^']*)'",
        "mamba_ssm_dtype {dtype} ignored",
        "The SSM state dtype '{dtype}' is not one of float32, bfloat16, float16, so float32 is used.",
        "Fix --mamba-ssm-dtype / SGLANG_MAMBA_SSM_DTYPE / the config's mamba_ssm_dtype.",
        source="sglang mamba2_state_dtype",
        source_text='Invalid mamba_ssm_dtype',
    ),
    Pattern(
        "RELU2_MOE_UNSUPPORTED", "sglang", "error",
        r"activation = relu2 is not supported",
        "relu2 MoE not supported on this path",
        "Nemotron's MoE uses the relu2 activation, which this sglang's fused-MoE path on this device refuses.",
        "Upgrade sglang (#24390 / #31605 admitted relu2 on XPU); try SGLANG_USE_SGL_XPU=1 for the sgl-kernel MoE.",
        source="sglang #31605, #24390",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='activation = relu2 is not supported',
    ),
    Pattern(
        "CAUSAL_CONV1D_MISSING", "sglang", "error",
        r"NameError: name '(?P<name>causal_conv1d\w*)' is not defined",
        "{name} is not bound on this device",
        "The Mamba2 layer's causal_conv1d kernel was imported only for CUDA, so on this device the name is missing.",
        f"Upgrade to sglang {_CONV1D_ON_XPU} (layers/attention/mamba/mamba.py binds the portable Triton "
        "causal_conv1d on XPU; #24390 / #31605).",
        source="sglang #31605, #24390; layers/attention/mamba/mamba.py",
        versions=f"a build before {PROFILES[0].label} (every profiled release binds it on XPU)"
        if _CONV1D_ON_XPU.startswith(PROFILES[0].label) else f"releases before {_CONV1D_ON_XPU}",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "CONV1D_UPDATE_XPU_KWARG", "sglang", "error",
        r"causal_conv1d_update_xpu\(\) got an unexpected keyword argument '(?P<arg>\w+)'",
        "XPU causal_conv1d_update does not take {arg}",
        "Speculative decoding passes {arg} to the XPU conv update kernel, which does not accept it.",
        "Disable speculative decoding on XPU, or upgrade sglang (#34720).",
        source="sglang #34720",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='causal_conv1d_update_xpu',
    ),
    Pattern(
        "NEMOTRON_PATTERN", "sglang", "error",
        r"Pattern must only contain characters 'M', '\*', '-' or 'E'",
        "hybrid_override_pattern has an unknown character",
        "NemotronH's hybrid_override_pattern may hold only M (mamba2), * (attention), - (MLP) and E (MoE).",
        "Fix hybrid_override_pattern in config.json (bringup inspect shows the map it gives).",
        source="sglang configs/nemotron_h.py",
        supersedes=("UNRECOGNIZED_ERROR",),
        source_text='Pattern must only contain characters',
    ),
    Pattern(
        "TRACK_INTERVAL_PAGE", "sglang", "error",
        r"^\s*AssertionError\s*$",
        "--mamba-track-interval is not a multiple of the page size",
        "With extra_buffer, state snapshots are taken every --mamba-track-interval tokens (default 256), which "
        "must be a whole number of pages; the assert has no message of its own.",
        "Make --mamba-track-interval a multiple of --page-size (e.g. 256 with page 64 or 128).",
        source="sglang validate_mamba_extra_buffer",
        near=r"mamba_track_interval\s*%\s*\S*page_size",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "TRACK_INTERVAL_SPECULATIVE", "sglang", "error",
        r"^\s*AssertionError\s*$",
        "--mamba-track-interval is shorter than the draft",
        "With extra_buffer and speculative decoding, --mamba-track-interval must be at least "
        "--speculative-num-draft-tokens; the assert has no message of its own.",
        "Raise --mamba-track-interval or lower --speculative-num-draft-tokens.",
        source="sglang validate_mamba_extra_buffer",
        near=r"mamba_track_interval\s*>=\s*\S*speculative_num_draft_tokens",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "HEALTH_CHECK_TIMEOUT", "sglang", "error",
        r"Health check failed\. Server couldn't get a response from detokenizer",
        "The server stopped answering",
        "/health runs a one-token generation; it timed out, so the scheduler is stuck or dead.",
        "Look above for the scheduler's traceback; restart the server.",
        source="sglang entrypoints/http_server.py",
        source_text="Health check failed. Server couldn't get a response from detokenizer",
    ),
)

BRINGUP: tuple[Pattern, ...] = (
    Pattern(
        "LAYER_NOT_IN_POOL", "bringup", "error",
        r"layer (?P<layer>\d+) is not in the (?P<pool>KV pool|state pool); it holds layers \[" + _IDS + r"\]",
        "Layer {layer} is not in the {pool}",
        "The embedded engine's {pool} stores only its own layers [{valid}]; something asked it for layer {layer}. "
        "This is the PR #32227 crash caught by our pools (PoolLayerError).",
        "The model code indexed the pool with a layer the pool was not built for: pass the global layer id of a "
        "layer of that kind, or build the pool over the layers the model really uses.",
        source="core/engine/pools.py PoolLayerError",
        kind="layer",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "ENGINE_POOL_EXHAUSTED", "bringup", "error",
        r"asked for (?P<want>\d+) (?P<what>[\w ]+?)s but only (?P<free>\d+) of (?P<total>\d+) are free",
        "The engine's {what} pool ran out",
        "A request needed {want} {what}(s) while {free} of {total} were free; the scheduler should have waited, "
        "so this points at its accounting.",
        "Report it with the log; meanwhile lower --max-running-requests or give the pools more memory.",
        source="core/engine/pools.py PoolExhaustedError",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "ENGINE_POOL_INTEGRITY", "bringup", "error",
        r"PoolIntegrityError: (?P<what>.+)",
        "Pool integrity check failed",
        "A KV page or state slot was owned twice, freed twice or leaked: {what}.",
        "Report it with the log; it is an engine bug, not a setting.",
        source="core/engine/pools.py PoolIntegrityError",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "ENGINE_POOLS_DO_NOT_FIT", "bringup", "error",
        r"cannot size the engine's pools: (?P<why>.+)",
        "The engine's pools do not fit",
        "The planner found no room for the pools: {why}",
        "Give the engine more memory (--mem-fraction), a shorter --context, fewer --max-running-requests, or a "
        "smaller dtype; bringup plan SOURCE --target embedded shows the split.",
        source="core/engine/engine.py, core/planner/embedded.py",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "ENGINE_NO_REQUEST_FITS", "bringup", "error",
        r"the pools have room for no request at all",
        "The pools hold no request",
        "After the weights, the pools cannot hold one request's state slot and KV pages.",
        "Raise --mem-fraction or lower the context the pools are planned for.",
        source="core/engine/engine.py",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "ENGINE_PROMPT_TOO_LONG", "bringup", "warning",
        r"the prompt has (?P<tokens>\d+) tokens and needs (?P<pages>\d+) KV pages of (?P<page>\d+) tokens, but the "
        r"KV pool holds only (?P<have>\d+) pages",
        "A prompt of {tokens} tokens can never fit the KV pool",
        "The prompt needs {pages} pages of {page} tokens and the whole pool has {have}; the request was refused.",
        "Shorten the prompt, or give the KV pool more memory (raise --mem-fraction, lower --max-running-requests).",
        source="core/engine/scheduler.py",
    ),
)

TORCH: tuple[Pattern, ...] = (
    Pattern(
        "DEVICE_OUT_OF_MEMORY", "torch", "error",
        r"(?P<device>CUDA|XPU|MPS backend|HIP) out of memory\.? ?(?:Tried to allocate (?P<size>[\d.]+ [KMGT]?i?B))?"
        r"(?:\. GPU (?P<gpu>\d+) has a total capacity of (?P<total>[\d.]+ [KMGT]?i?B) of which (?P<free>[\d.]+ [KMGT]?i?B) is free)?",
        "{device} ran out of memory",
        "An allocation[[ of {size}]] failed on the device[[ (total {total}, {free} free)]]. At start-up this means the "
        "weights and the static pools take too much; during serving, the activations of a large batch or prefill "
        "chunk do not fit in what the pools left.",
        "Lower --mem-fraction-static (leave room for activations), --chunked-prefill-size or --max-running-requests; "
        "shard with --tp-size; check that nothing else holds the device.",
        source="c10 CUDACachingAllocator / XPUCachingAllocator",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "DEVICE_OUT_OF_MEMORY", "torch", "error",
        r"UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|PI_ERROR_OUT_OF_RESOURCES|ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
        "XPU ran out of memory (Level Zero)",
        "The Intel runtime refused a device allocation below torch's allocator (a kernel's scratch or a "
        "oneDNN workspace), which torch's own counters do not show.",
        "Leave more memory unreserved (SGLang already reserves 2 GB extra on XPU; lower --mem-fraction-static "
        "further), or shrink --chunked-prefill-size.",
        source="Level Zero / Unified Runtime",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "HOST_OUT_OF_MEMORY", "torch", "error",
        r"DefaultCPUAllocator: can't allocate memory: you tried to allocate (?P<bytes>\d+) bytes",
        "Host memory ran out",
        "torch could not allocate {bytes} bytes of host memory.",
        "Load fewer weights at once, use a smaller dtype, close other programs, or plan with bringup plan --device cpu.",
        source="c10 DefaultCPUAllocator",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "TORCH_NOT_COMPILED_FOR_DEVICE", "torch", "error",
        r"Torch not compiled with (?P<device>CUDA|XPU) enabled",
        "This torch has no {device} support",
        "The installed torch build was made without {device}, so no {device} device can be used.",
        "Install a torch build with {device} support in this environment (wheels from "
        "https://download.pytorch.org/whl/xpu for XPU, /whl/cu128 and the like for CUDA); bringup probe shows what "
        "this torch supports.",
        source="torch/{device}/__init__.py _lazy_init",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "NO_DEVICE_FOUND", "torch", "error",
        r"Found no NVIDIA driver on your system|No CUDA GPUs are available|No XPU devices are available|"
        r"CUDA driver initialization failed|no CUDA-capable device is detected",
        "No device found",
        "torch is built for the device but finds none at run time: no driver, a container without the device, or "
        "CUDA_VISIBLE_DEVICES / ZE_AFFINITY_MASK hiding it.",
        "Check the driver (nvidia-smi / xpu-smi / sycl-ls), the container's device mounts, and the visibility "
        "variables; bringup probe lists what torch sees.",
        source="torch cuda / xpu runtime",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "INVALID_DEVICE_ORDINAL", "torch", "error",
        r"invalid device ordinal|Invalid device ordinal|device=(?P<ordinal>\d+), num_gpus=",
        "Device index out of range",
        "A process asked for a device index the machine (or the visibility mask) does not have, e.g. --tp-size "
        "larger than the visible devices or --base-gpu-id too high.",
        "Lower --tp-size / --base-gpu-id, or make more devices visible.",
        source="torch runtime",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "FP64_UNSUPPORTED", "torch", "error",
        r"Required aspect fp64 is not supported on the device",
        "This XPU has no float64",
        "Intel Arc and many client GPUs lack fp64; a kernel or a tensor used float64.",
        "Keep tensors in float32 or lower on XPU (look for .double() or numpy float64 arrays turned into tensors); "
        "IPEX_FP64_EMULATION / OverrideDefaultFP64Settings=1 with IGC_EnableDPEmulation=1 emulate it slowly.",
        source="Intel GPU runtime",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "DTYPE_NOT_IMPLEMENTED", "torch", "error",
        r"\"(?P<op>[\w:]+)\" not implemented for '(?P<dtype>\w+)'",
        "{op} has no {dtype} kernel on this device",
        "The operator {op} is not implemented for {dtype} on this device (common on CPU for Half and on older "
        "backends for BFloat16 or Float8).",
        "Run in another dtype (--dtype bfloat16 or float32 on CPU), or on a device that has the kernel.",
        source="ATen dispatch",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "DTYPE_UNSUPPORTED", "torch", "error",
        r"Got unsupported ScalarType (?P<dtype>\w+)|(?P<dtype2>bfloat16|BFloat16|float8\w*|Float8\w*) is not supported on this (?:device|platform|GPU)",
        "Unsupported dtype",
        "A library or device cannot handle the dtype {dtype}{dtype2} (numpy has no bfloat16; older GPUs lack bf16 or fp8).",
        "Convert before leaving torch (tensor.float()), or choose another --dtype / --kv-cache-dtype.",
        source="torch / numpy",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "DEVICE_SIDE_ASSERT", "torch", "error",
        r"device-side assert triggered|an illegal memory access was encountered",
        "A kernel failed on the device",
        "A GPU kernel hit an assertion or read out of bounds: often a token id beyond the vocabulary, a bad "
        "index into a pool, or a kernel bug. Later CUDA calls all fail after this one.",
        "Rerun with CUDA_LAUNCH_BLOCKING=1 to see the failing kernel; check token ids against vocab_size.",
        source="CUDA runtime",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "TRITON_OUT_OF_RESOURCES", "triton", "error",
        r"OutOfResources: out of resource: (?P<what>[\w ]+), Required: (?P<need>\d+), Hardware limit: (?P<limit>\d+)",
        "A Triton kernel needs more {what} than the device has",
        "The kernel's block sizes need {need} of {what} and this device allows {limit} (a config tuned for a "
        "bigger GPU).",
        "Use smaller block sizes / num_stages for this device, or another backend for this op.",
        source="triton runtime",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "SEGFAULT", "system", "error",
        r"Segmentation fault|Fatal Python error: Segmentation fault|SIGSEGV",
        "The process crashed (segmentation fault)",
        "Native code crashed. On some Intel systems torch.xpu calls segfault (pytorch#179891 on Arc Pro B70, "
        "torch-xpu-ops#4045 on WSL2); elsewhere it is usually a driver or kernel mismatch.",
        "Run bringup probe: it runs each device call in a child process and names the one that crashes; match "
        "driver and torch versions.",
        source="pytorch#179891; torch-xpu-ops#4045",
    ),
    Pattern(
        "MODULE_MISSING", "system", "error",
        r"ModuleNotFoundError: No module named '(?P<module>[\w.]+)'",
        "Python module {module} is missing",
        "The code imports {module}, which is not installed in this environment (sgl_kernel, flash_attn, fla, "
        "intel_extension_for_pytorch and triton are the usual ones in bring-up).",
        "Install the package that provides {module} for this device, or pick a backend that does not need it.",
        source="python import",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
)

TRANSFORMERS: tuple[Pattern, ...] = (
    Pattern(
        "UNKNOWN_ARCHITECTURE", "transformers", "error",
        r"has model type `(?P<model_type>[\w-]+)` but Transformers does not recognize this architecture",
        "transformers does not know model type {model_type}",
        "This transformers version has no {model_type} implementation, and the checkpoint's own code was not used.",
        "Upgrade transformers (pip install --upgrade transformers), or load with trust_remote_code=True when the "
        "checkpoint ships its modeling code.",
        source="transformers models/auto/configuration_auto.py",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "UNKNOWN_ARCHITECTURE", "transformers", "error",
        r"Unrecognized configuration class .*for this kind of AutoModel: (?P<auto>\w+)",
        "transformers has no {auto} for this config",
        "The config class is known, but no model class is registered for {auto}.",
        "Upgrade transformers, or use trust_remote_code=True with the checkpoint's auto_map.",
        source="transformers models/auto/auto_factory.py",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "UNKNOWN_ARCHITECTURE", "transformers", "error",
        r"Unrecognized model in (?P<path>\S+)\. Should have a `model_type` key",
        "config.json has no model_type",
        "transformers cannot tell which architecture {path} is.",
        "Point at the model folder whose config.json has model_type, or add it.",
        source="transformers models/auto/configuration_auto.py",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "TRUST_REMOTE_CODE", "transformers", "error",
        r"contains custom code which must be executed to correctly load the model|"
        r"set the option `trust_remote_code=True` to remove this error|"
        r"Please pass the argument `trust_remote_code=True` to allow custom code to be run",
        "The checkpoint needs trust_remote_code",
        "The model ships its own configuration/modeling code (auto_map in config.json), and loading it runs that "
        "code, which needs explicit consent.",
        "Read the repository's code, then pass --trust-remote-code (sglang) or trust_remote_code=True "
        "(transformers); or upgrade transformers if it now has the architecture built in.",
        source="transformers dynamic_module_utils.py resolve_trust_remote_code",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "WEIGHTS_NOT_INITIALIZED", "transformers", "warning",
        r"Some weights of (?P<cls>\w+) were not initialized from the model checkpoint|\bMISSING\b.*newly initialized",
        "Some weights were missing from the checkpoint",
        "Parameters of the model were not found in the checkpoint and got random values: the tensor names do "
        "not match this implementation, so its output will be wrong.",
        "Compare the checkpoint's tensor names with the model's (a rename or a different architecture class).",
        source="transformers modeling_utils / utils/loading_report.py",
    ),
    Pattern(
        "HUB_UNREACHABLE", "transformers", "error",
        r"We couldn't connect to '(?P<url>https?://[^']+)'|LocalEntryNotFoundError|Cannot find the requested files in the disk cache",
        "The Hugging Face hub could not be reached",
        "The files were not in the local cache and the hub was unreachable (offline, proxy, or HF_HUB_OFFLINE=1).",
        "Download the model where the hub is reachable and point at the local folder, or fix the network/proxy.",
        source="huggingface_hub",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "HUB_GATED", "transformers", "error",
        r"Cannot access gated repo|GatedRepoError|401 Client Error",
        "The model repository is gated",
        "The repository needs an accepted licence and a token.",
        "Accept the licence on the model page, then `hf auth login` or set HF_TOKEN.",
        source="huggingface_hub",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
)



def _printed_by(p: Pattern) -> Pattern:
    """Label an SGLang pattern with the releases whose source holds its text (profiles' `messages`)."""
    if not p.source_text or p.versions or p.versions_by:
        return p
    found = versions_where(lambda q: p.source_text in q.messages)
    if found == "no profiled release":
        found = f"no release from {_RANGE} (an earlier or later build, a fork, or a kernel package)"
    return replace(p, versions=found)


SGLANG = tuple(_printed_by(p) for p in SGLANG)
PATTERNS: tuple[Pattern, ...] = SGLANG + BRINGUP + TORCH + TRANSFORMERS


def codes() -> list[str]:
    """Every finding code the catalogue can produce, once each."""
    return list(dict.fromkeys(p.code for p in PATTERNS)) + ["UNRECOGNIZED_ERROR"]


# Findings that do not come from one line but from the log as a whole (crosscheck.py).
DERIVED_CODES = ("POOLS_MATCH_PLAN", "POOLS_DIFFER_FROM_PLAN")
