"""SGLang's own sizing, as its source does it, release by release (the profiles in core/rules;
../shared/reference/sglang-notes.md §2.5 for the arithmetic).

1. Defaults by device memory and release (sglang_defaults.py): chunked_prefill_size and the decode
   cuda-graph max_bs; unless --mem-fraction-static is given, mem_fraction_static =
   (gpu_mem - reserved)/gpu_mem with reserved (MB) = 512 + 1.5 x max(chunked_prefill_size, 2048)
   + tp*pp/8 x 1024 + graph reserve, at least 10 GB on devices over 60 GB, + 2048 on XPU (0.5.20+).
2. `rest` = free memory before loading x mem_fraction - weights (per rank); SGLang takes the memory
   free before the weights load (`available_memory`, default: the device memory). rest <= 0 is
   "Loaded weights leave no GPU memory for the KV cache".
3. Hybrids: mamba budget = rest x r/(1+r) (r = `mamba_full_memory_ratio`, 0.9);
   `max_mamba_cache_size` = floor((budget - per_slot)/per_slot); or `--max-mamba-cache-size`; or,
   with `--disable-radix-cache` and `--max-running-requests`, that many. The pool holds size+1 slots.
4. KV tokens = floor((rest - (slots+1) x per_slot) / cell), rounded down to the page size; the
   minimum over PP stages (a stage with no attention layer has no limit of its own).
5. `max_running_requests` = min(clamp(int(tokens/context x 512), 2048, 4096), tokens//2), or the
   user's value; hybrids cap it at `max_mamba_cache_size // mamba_ratio` (1 without radix cache,
   3 no_buffer, 4 extra_buffer_lazy or extra_buffer without overlap, 5 extra_buffer with overlap).
The figures are per rank of the busiest stage.
"""

from __future__ import annotations

from bringup.core.errors import UserError
from bringup.core.layermap.vocabulary import LayerMap

from bringup.core.layermap import geometry
from .budget import config_context, page_floor, stage_of_layers, stage_weight_shares
from .sglang_defaults import sglang_defaults
from bringup.core.layermap.sizes import format_bytes
from .memory_plan import Capacity, MemoryPlan, Segment, StagePlan

MB = 1024**2
GB = 1024**3
DEFAULT_MAMBA_FULL_MEMORY_RATIO = 0.9
STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
# Archs SGLang routes through the mamba radix cache but never lets use extra_buffer (§1.3).
_NO_EXTRA_BUFFER_ARCHS = ("Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "ZayaForCausalLM", "JetNemotronForCausalLM",
                          "JetVLMForConditionalGeneration", "InternS2MobiusForCausalLM")


def profile_of(version):
    """The rule profile for a release (a Version), and a note when the nearest earlier one stands in."""
    from bringup.core.rules.profiles import NEWEST, OLDEST, profile_for

    profile = profile_for(version)
    label = str(version)
    if profile is None:
        raise UserError(f"sglang {label} is older than the oldest profile ({OLDEST.label}); its defaults were never read. "
                        f"Plan for sglang=={OLDEST.label} or newer")
    if profile.release == version:
        return profile, None
    if version > NEWEST.release:
        return profile, (f"sglang {label} is newer than the newest profile; the defaults of {profile.label} are used "
                         "(later releases may differ)")
    return profile, f"no profile for sglang {label}; the defaults of {profile.label} (the nearest earlier) are used"


def resolve_strategy(layer_map: LayerMap, *, profile, device: str, strategy: str, disable_radix_cache: bool,
                     disable_overlap_schedule: bool, page_size: int) -> tuple[str, int, list[str]]:
    """(strategy, state slots per running request, notes), after SGLang's auto resolution."""
    notes: list[str] = []
    if strategy not in STRATEGIES:
        raise UserError(f"unknown mamba strategy {strategy!r}; choose one of: {', '.join(STRATEGIES)}")
    if disable_radix_cache:
        return "disabled", 1, notes
    if strategy == "auto":
        extra_ok = layer_map.architecture not in _NO_EXTRA_BUFFER_ARCHS
        if device == "xpu" and profile.extra_buffer_refused_on_xpu:
            extra_ok = False
            notes.append(f"sglang {profile.label} never picks extra_buffer on XPU: auto is no_buffer with the overlap "
                         f"schedule off ({profile.source('extra_buffer_refused_on_xpu')})")
        if extra_ok and (not disable_overlap_schedule or page_size > 1):
            strategy = "extra_buffer"
        else:
            strategy, disable_overlap_schedule = "no_buffer", True
        notes.append(f"auto mamba strategy resolves to {strategy} (bringup validate checks it is allowed here)")
    if strategy == "no_buffer":
        return strategy, 3, notes
    if strategy == "extra_buffer_lazy":
        return strategy, 4, notes
    return strategy, 5 if not disable_overlap_schedule else 4, notes


def _default_max_running(tokens: int, context: int) -> int:
    return min(max(2048, min(4096, int(tokens / context * 512))), tokens // 2)


def plan_sglang(
    layer_map: LayerMap, *, version, tp: int, pp: int, device: str, device_memory: int, mem_fraction: float | None,
    weights_bytes: int, weights_source: str, dtype: str, kv_dtype: str, conv_dtype: str, ssm_dtype: str, dtype_bytes,
    page_size: int | None, context: int | None, max_running_requests: int | None,
    mamba_strategy: str = "auto", disable_radix_cache: bool = False, disable_overlap_schedule: bool = False,
    mamba_full_memory_ratio: float = DEFAULT_MAMBA_FULL_MEMORY_RATIO, max_mamba_cache_size: int | None = None,
    chunked_prefill_size: int | None = None, cuda_graph_max_bs: int | None = None, disable_cuda_graph: bool = False,
    available_memory: int | None = None, max_total_tokens: int | None = None,
) -> MemoryPlan:
    notes: list[str] = []
    problems: list[str] = []
    profile, profile_note = profile_of(version)
    if profile_note:
        notes.append(profile_note)
    page_size = page_size or 1
    context = context or config_context(layer_map) or 4096
    for flag, value in (("--chunked-prefill-size", chunked_prefill_size), ("--cuda-graph-max-bs", cuda_graph_max_bs)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}")
    if available_memory is not None and not 0 < available_memory <= device_memory:
        raise UserError(f"free memory before loading ({available_memory:,} B) must be positive and at most the "
                        f"device memory ({device_memory:,} B)")
    mla = bool((layer_map.config or {}).get("kv_lora_rank")) or layer_map.family == "kimi_linear"
    defaults = sglang_defaults(profile, device=device, device_memory=device_memory, tp=tp, pp=pp, mla=mla,
                               mem_fraction=mem_fraction, chunked_prefill_size=chunked_prefill_size,
                               cuda_graph_max_bs=cuda_graph_max_bs, max_running_requests=max_running_requests,
                               disable_cuda_graph=disable_cuda_graph)
    if mem_fraction is None:
        mem_fraction = defaults.mem_fraction
    assumed = dict(defaults.assumed)
    available = available_memory or device_memory
    if available_memory is not None:
        notes.append(f"budget from {format_bytes(available)} free before the weights load (SGLang sizes the pools "
                     "from the memory free at load time, not the device total)")
    kv_b, conv_b, ssm_b = dtype_bytes(kv_dtype), dtype_bytes(conv_dtype), dtype_bytes(ssm_dtype)
    hybrid = bool(layer_map.state_layers)
    strategy, ratio, strategy_notes = ("none", 0, [])
    if hybrid:
        strategy, ratio, strategy_notes = resolve_strategy(
            layer_map, profile=profile, device=device, strategy=mamba_strategy, disable_radix_cache=disable_radix_cache,
            disable_overlap_schedule=disable_overlap_schedule, page_size=page_size)
    notes += strategy_notes

    stages = stage_of_layers(layer_map, pp)
    shares = stage_weight_shares(layer_map, stages)
    # Mamba sizing charges every stage the largest stage share of state layers (pp_layer_scale).
    state_by_stage = [geometry.state_bytes_per_request(s, tp, conv_b, ssm_b) for s in stages]
    conv, ssm = max(state_by_stage, key=sum)
    per = conv + ssm
    budget = available * mem_fraction
    stage_plans: list[StagePlan] = []
    for index, layers in enumerate(stages):
        weights = int(weights_bytes * shares[index] / tp)
        cell = geometry.kv_bytes_per_token(layers, tp, kv_b)
        rest = budget - weights
        slots = 0
        if rest <= 0 and weights >= device_memory:
            problems.append(
                f"The weights on one device ({format_bytes(weights)}, stage {index}) are larger than the device "
                f"({format_bytes(device_memory)}); shard them with a larger --tp or --pp, or use a bigger device")
        elif rest <= 0:
            problems.append(
                f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={mem_fraction:.3f}. "
                f"Raise --mem-fraction-static above {weights / device_memory:.3f} (stage {index}: weights "
                f"{format_bytes(weights)} of {format_bytes(device_memory)}), or use more TP/PP or a device with more memory")
        elif hybrid:
            slots = _mamba_slots(rest, per, max_mamba_cache_size, disable_radix_cache, max_running_requests,
                                 mamba_full_memory_ratio)
            if slots <= 0 and not any("state cache" in p for p in problems):
                problems.append(
                    f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
                    f"max_mamba_cache_size={slots} (total_rest_memory={rest / GB:.2f} GB, mamba_cache_per_req="
                    f"{per / MB:.2f} MB). Reduce --max-running-requests, increase --mem-fraction-static, or use a "
                    "device with more memory")
        kv_budget = rest - (slots + 1) * per if hybrid else rest
        tokens = page_floor(int(kv_budget // cell), page_size) if cell and rest > 0 else (None if not cell else 0)
        layer_ids = [l.index for l in layers]
        stage_plans.append(StagePlan(
            index, (min(layer_ids), max(layer_ids)) if layer_ids else (0, -1), sum(l.is_kv for l in layers),
            sum(l.is_state for l in layers), weights, cell, per if hybrid else 0, tokens, slots))

    bounded = [s.kv_tokens for s in stage_plans if s.kv_tokens is not None]
    if bounded:
        kv_tokens = min(bounded)
    else:  # no KV layer anywhere: SGLang uses --max-total-tokens or the context length
        kv_tokens = page_floor(max_total_tokens or context, page_size)
        notes.append("no attention layers: SGLang sizes the token pool to --max-total-tokens or the context length")
    if max_total_tokens is not None and bounded:
        kv_tokens = min(kv_tokens, page_floor(max_total_tokens, page_size))
    slots = min(s.state_slots for s in stage_plans) if hybrid else 0
    busiest = max(stage_plans, key=lambda s: s.weights_bytes + (s.kv_tokens or 0) * s.kv_bytes_per_token)

    running, bottleneck = _max_running(kv_tokens, context, max_running_requests, slots, ratio, hybrid)
    if any(s.weights_bytes >= budget for s in stage_plans):
        running, bottleneck = 0, "weights"
    if hybrid and kv_tokens > 0 and running <= 0 and not problems:
        problems.append("Hybrid (mamba/linear-attention) state cache is too small to serve any requests: "
                        f"{slots} slots at {ratio} per request; raise --mem-fraction-static or --mamba-full-memory-ratio")
    kv_rows = (kv_tokens + page_size) if kv_tokens else 0  # SGLang allocates size + page_size rows
    kv_pool = kv_rows * busiest.kv_bytes_per_token
    state_pool = (slots + 1) * per if hybrid else 0
    if pp > 1:
        notes.append(f"figures are per rank of the busiest stage (stage {busiest.stage}); KV tokens are the minimum over stages")

    all_attention = _all_attention(layer_map, stages, shares, weights_bytes, tp, kv_b, budget, page_size, context,
                                   max_running_requests)
    weights = busiest.weights_bytes
    breakdown = [
        Segment("weights", weights, f"weights {format_bytes(weights)}"),
        Segment("kv_pool", kv_pool, f"KV pool {kv_tokens:,} tokens"),
        Segment("state_pool", state_pool, f"mamba pool {slots:,} (+1) slots"),
        Segment("reserve", int(device_memory - budget), f"reserve ({1 - mem_fraction:.1%}: activations, graphs)"
                + (", and memory in use before loading" if available < device_memory else "")),
        Segment("free", max(0, int(budget - weights - kv_pool - state_pool)), "unallocated in the static budget"),
    ]
    return MemoryPlan(
        model=layer_map.name, target=f"sglang=={version}", device=device,
        device_memory=device_memory, mem_fraction=mem_fraction, tp=tp, pp=pp, dtype=dtype, kv_dtype=kv_dtype,
        conv_dtype=conv_dtype, ssm_dtype=ssm_dtype, page_size=page_size, context=context, weights_bytes=weights,
        weights_source=weights_source, kv_bytes_per_token=busiest.kv_bytes_per_token,
        state_bytes_per_request=per if hybrid else 0, conv_bytes_per_request=conv if hybrid else 0,
        ssm_bytes_per_request=ssm if hybrid else 0, kv_tokens=kv_tokens, state_slots=slots,
        max_running_requests=running, requests_at_context=_at_context(kv_tokens, context, running, hybrid),
        bottleneck=bottleneck, strategy=strategy, state_slots_per_request=ratio,
        kv_layers=len(layer_map.kv_layers), state_layers=len(layer_map.state_layers), all_attention=all_attention,
        breakdown=breakdown, stages=stage_plans, notes=notes, problems=problems, assumed=assumed,
    )


def _mamba_slots(rest: float, per: int, max_mamba_cache_size, disable_radix_cache, max_running_requests, ratio) -> int:
    if max_mamba_cache_size is not None:
        return max_mamba_cache_size
    if disable_radix_cache and max_running_requests is not None:
        return max(1, max_running_requests)
    if per == 0:
        return 0
    budget = rest * ratio / (1 + ratio)
    return int((budget - per) // per)


def _max_running(tokens: int, context: int, requested, slots: int, ratio: int, hybrid: bool) -> tuple[int, str]:
    base = requested if requested is not None else _default_max_running(tokens, context)
    neck = "max_running_requests" if requested is not None else "kv"
    if hybrid and ratio:
        cap = slots // ratio
        if cap < base:
            return cap, "state"
    return base, neck


def _at_context(tokens: int, context: int, running: int, hybrid: bool) -> int:
    """Requests that can each hold `context` tokens at once."""
    return min(tokens // context, running) if hybrid else tokens // context


def _all_attention(layer_map, stages, shares, weights_bytes, tp, kv_b, budget, page_size, context, requested):
    """The same launch if every mixer layer kept a KV cache like the model's attention layers (no state)."""
    elems = geometry.attention_kv_elems(layer_map.layers, tp)
    if elems is None:
        return None
    tokens = None
    cell_max = 0
    for index, layers in enumerate(stages):
        cell = elems * len(geometry.mixer_layers(layers)) * kv_b
        rest = budget - weights_bytes * shares[index] / tp
        if cell:
            stage_tokens = page_floor(int(max(0, rest) // cell), page_size)
            tokens = stage_tokens if tokens is None else min(tokens, stage_tokens)
            cell_max = max(cell_max, cell)
    tokens = tokens or 0
    running, neck = _max_running(tokens, context, requested, 0, 0, False)
    return Capacity(cell_max, 0, tokens, 0, running, tokens // context, neck)
