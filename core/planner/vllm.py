"""vLLM's own sizing of a launch, as its source does it (vllm_facts.py has each file:line; read from 0.33.0).

Where vLLM differs from SGLang (core/planner/sglang.py):
1. Budget: ceil(device memory x gpu_memory_utilization) (0.92 by default), minus the weights; vLLM also
   subtracts the profiling run's peak activations (and, opt-in, a CUDA-graph estimate), which cannot be
   known without running: the figures are an upper bound.
2. One block pool for every layer kind. Hybrid: the attention block grows until one attention page holds
   one Mamba state, and the Mamba page is padded to it (the rules' page alignment, core/rules/vllm.py),
   so every page has one size. Layers are grouped (group size: the fewest layers of one kind, or the
   most when within 1.5x); a block holds one page for each layer of a group:
   num_blocks = available // (page x group size).
3. A request of L tokens holds cdiv(L, block) blocks per attention group and 2 blocks per Mamba group
   with mamba_cache_mode align (prefix caching on, the default), 1 with none. vLLM's "KV cache size"
   is int(num_blocks / blocks(max_model_len) x max_model_len) tokens.
4. max_num_seqs (`vllm serve`: 1024 on devices of >= 70 GiB, else 256) caps running requests; with
   full CUDA graphs a hybrid needs max_num_seqs <= num_blocks (the "Mamba cache blocks"), or start-up
   stops at graph capture.
The figures are per device (one TP rank); PP splits the layers, and each stage's groups hold its share.
"""

from __future__ import annotations

from math import ceil

from bringup.core.errors import UserError
from bringup.core.layermap.vocabulary import LayerMap
from bringup.core.rules import vllm_facts as F

from bringup.core.layermap import geometry
from .budget import config_context, stage_weight_shares
from .memory_plan import Capacity, MemoryPlan, Segment
from bringup.core.layermap.sizes import format_bytes

GIB = 1024**3


def default_max_num_seqs(device_memory: int) -> int:
    """`vllm serve`'s default: 1024 on devices of 70 GiB or more (A100 and GB10 aside), else 256."""
    return next(seqs for floor, seqs in F.MAX_NUM_SEQS_SERVE.value if device_memory >= floor * GIB)


def _check(layer_map: LayerMap, version, device: str, tp: int, pp: int, dtype: str, kv_dtype: str,
           ssm_dtype: str | None, page_size: int | None, prefix_caching: bool):
    """The rules' resolution of this launch (block size, page, mamba_cache_mode): what Validate approves."""
    from bringup.core.rules.settings import DTYPES, KV_DTYPES, LaunchSettings
    from bringup.core.rules.model_facts import facts_for_pp
    from bringup.core.rules.vllm import check_vllm

    if dtype not in DTYPES:
        raise UserError(f"vLLM's --dtype has no {dtype}; use one of {', '.join(DTYPES)}")
    if kv_dtype not in KV_DTYPES and kv_dtype != dtype:
        raise UserError(f"vLLM's --kv-cache-dtype has no {kv_dtype}; use one of {', '.join(KV_DTYPES)}")
    settings = LaunchSettings(device=device, tp=tp, pp=pp, dtype=dtype,
                              kv_dtype="auto" if kv_dtype == dtype else kv_dtype, mamba_ssm_dtype=ssm_dtype,
                              page_size=page_size, disable_radix_cache=not prefix_caching)
    return check_vllm(facts_for_pp(layer_map, pp), settings, layer_map, version)


def plan_vllm(layer_map: LayerMap, *, version, device: str, device_memory: int,
              mem_fraction: float | None, weights_bytes: int, weights_source: str, dtype: str, kv_dtype: str,
              conv_dtype: str, ssm_dtype: str | None, dtype_bytes, page_size: int | None, context: int | None,
              max_running_requests: int | None, tp: int = 1, pp: int = 1, disable_radix_cache: bool = False,
              mamba_strategy: str | None = None) -> MemoryPlan:
    if mamba_strategy not in (None, "auto"):
        raise UserError(f"--mamba-strategy {mamba_strategy} is SGLang's; vLLM's mamba_cache_mode follows prefix "
                        "caching (align with it, none with --disable-radix-cache)")
    if device not in F.DEVICES.value:
        raise UserError(f"vLLM has no in-tree platform for {device} (it has {', '.join(F.DEVICES.value)})")
    label = str(version)
    c = _check(layer_map, version, device, tp, pp, dtype, kv_dtype, ssm_dtype, page_size,
               prefix_caching=not disable_radix_cache and F.PREFIX_CACHING_DEFAULT.value)
    r = c.r
    notes, problems, assumed = [], [], {}
    if version != F.READ_VERSION:
        notes.append(f"vLLM's formulas were read from {F.READ_VERSION}; {label} is planned with them")

    # What one rank holds: the busiest stage's layers and weights.
    stages = [list(layer_map.layers[a:b]) for a, b in F.pp_ranges(layer_map.num_layers, pp)]  # vLLM's own split
    shares = stage_weight_shares(layer_map, stages)
    busiest = max(range(pp), key=lambda i: shares[i])
    layers = stages[busiest]
    kv_layers = [l for l in layers if l.is_kv]
    state_layers = [l for l in layers if l.is_state]
    weights = int(weights_bytes * shares[busiest] / tp)

    default_fraction, fraction_source = F.by_release(F.GPU_MEMORY_UTILIZATION_BY_RELEASE, version)
    fraction = mem_fraction if mem_fraction is not None else default_fraction
    if mem_fraction is None:
        assumed["gpu_memory_utilization"] = f"{fraction} (vLLM {label}'s default; {fraction_source})"
    requested = ceil(device_memory * fraction)
    available = requested - weights
    kv_name = r.kv_dtype if r.kv_dtype not in (None, "auto") else kv_dtype  # the rules resolve it for hybrids
    kv_b = dtype_bytes(kv_name)
    attn_token = max((geometry.kv_bytes_per_token([l], tp, kv_b) for l in kv_layers), default=0)
    conv_b, ssm_b = dtype_bytes(r.mamba_conv_dtype or dtype), dtype_bytes(r.mamba_ssm_dtype or ssm_dtype or dtype)
    conv_state, ssm_state = geometry.state_bytes_per_request(state_layers, tp, conv_b, ssm_b)
    block = r.page_size
    mode = r.mamba_strategy if state_layers else "none"
    per_state = F.MAMBA_BLOCKS_PER_REQUEST.value[mode] if state_layers else 0
    if "page_bytes" in c.derived:  # a hybrid: one page size for both kinds (the rules' alignment)
        page = c.derived["page_bytes"]
    else:
        page = block * attn_token or max((sum(geometry.state_bytes_per_request([l], tp, conv_b, ssm_b))
                                          for l in state_layers), default=0)
    counts = [len(kv_layers), len(state_layers)]
    group = F.group_size(counts)
    attn_groups = -(-counts[0] // group) if counts[0] else 0
    mamba_groups = -(-counts[1] // group) if counts[1] else 0
    bytes_per_block = page * group
    blocks = max(0, available) // bytes_per_block if bytes_per_block else 0

    def blocks_per_request(tokens: int) -> int:
        return attn_groups * -(-tokens // block) + mamba_groups * per_state

    max_len = config_context(layer_map) or context or 4096
    context = context or max_len
    assumed["max_model_len"] = f"{max_len:,} (the config's context; {F.MAX_MODEL_LEN_SOURCE})"
    if page_size is None:
        assumed["block_size"] = f"{block} ({r.why.get('page_size', F.DEFAULT_BLOCK_SIZE.source)})"
    if state_layers:
        assumed["mamba_cache_mode"] = f"{mode} ({r.why.get('mamba_strategy', F.MAMBA_CACHE_MODE_SOURCE)})"
    seqs = max_running_requests or default_max_num_seqs(device_memory)
    if max_running_requests is None:
        assumed["max_num_seqs"] = (f"{seqs} (vllm serve's default for a device of {format_bytes(device_memory)}; "
                                   f"{F.MAX_NUM_SEQS_SERVE.source}; 256 on an A100 whatever its memory)")
    per_max = blocks_per_request(max_len)
    concurrency = blocks / per_max if per_max else 0.0
    kv_tokens = int(concurrency * max_len) if kv_layers else 0
    at_context = blocks // blocks_per_request(context) if blocks_per_request(context) else 0
    smallest = blocks_per_request(1)  # a request of one block: what caps running requests at best
    by_blocks = blocks // smallest if smallest else 0
    running = min(seqs, by_blocks)
    if available <= 0:
        bottleneck = "weights"
    elif by_blocks >= seqs:
        bottleneck = "max_running_requests"
    else:  # the kind that takes more of the blocks a running request holds
        bottleneck = "state" if mamba_groups * per_state >= attn_groups else "kv"

    if available <= 0:
        problems.append(f"the weights ({format_bytes(weights)} per device) leave nothing of the "
                        f"{format_bytes(requested)} vLLM asks for (--gpu-memory-utilization {fraction}): 'No available "
                        "memory for the cache blocks' (vllm/v1/core/kv_cache_planning.py:56-64)")
    elif blocks == 0:
        problems.append(f"no cache block of {format_bytes(bytes_per_block)} fits in the {format_bytes(available)} left "
                        "after the weights")
    else:
        need = counts[0] * -(-max_len // block) * page + counts[1] * per_state * page
        if kv_layers and need > available:
            problems.append(f"one request of the model's {max_len:,} tokens needs {format_bytes(need)} of cache, "
                            f"more than the {format_bytes(available)} left: vLLM stops at start-up ({F.NEEDED_SOURCE}); "
                            "pass a smaller --max-model-len")
        if state_layers and seqs > blocks and version >= F.MAX_SEQS_CHECK_SINCE.value:
            text = (f"max_num_seqs {seqs} is above the {blocks:,} Mamba cache blocks ({F.MAX_SEQS_SOURCE}); pass "
                    f"--max-num-seqs {blocks} or fewer")
            if device == "xpu":
                notes.append(text + " (on XPU this stops start-up only with XPU graphs on)")
            else:
                problems.append(text)
    if blocks and bytes_per_block:
        notes.append(f"{blocks:,} blocks of {block} tokens, {format_bytes(bytes_per_block)} each ({format_bytes(page)} "
                     f"page x {group} layers; {F.NUM_BLOCKS_SOURCE}), shared by attention and Mamba: the KV tokens and "
                     "state slots are two views of one pool, not two pools")
    notes.append(f"upper bound: vLLM also subtracts the profiling run's peak activations and non-torch memory "
                 f"({F.AVAILABLE_KV_SOURCE})")
    if layer_map.sliding_attention_layers:
        notes.append("sliding-window layers are counted as full attention layers here (vLLM holds only their window)")
    if pp > 1:
        notes.append(f"PP {pp}: figures for stage {busiest} (layers {layers[0].index}-{layers[-1].index})")

    pool = blocks * bytes_per_block
    breakdown = [
        Segment("weights", weights, f"weights {format_bytes(weights)}"),
        Segment("block_pool", pool, f"{blocks:,} blocks of {block} tokens, one pool for attention and Mamba"),
        Segment("reserve", device_memory - requested, f"not requested ({1 - fraction:.1%}: --gpu-memory-utilization)"),
        Segment("free", max(0, requested - weights - pool), "activations, graphs and the rest of a block"),
    ]
    kinds = geometry.mixer_layers(layers)
    all_attention = None
    if kinds and attn_token:  # the same budget if every mixer layer were full attention (one group)
        aa_block = F.default_block_size(version).value
        aa_page = aa_block * attn_token * len(kinds)
        aa_blocks = max(0, available) // aa_page
        aa_ctx = aa_blocks // -(-context // aa_block)
        all_attention = Capacity(attn_token * len(kinds), 0, aa_blocks * aa_block, 0, min(seqs, aa_blocks), aa_ctx,
                                 "kv" if aa_blocks < seqs else "max_running_requests")
    return MemoryPlan(
        model=layer_map.name, target=f"vllm=={label}", device=device, device_memory=device_memory,
        mem_fraction=fraction, tp=tp, pp=pp, dtype=dtype, kv_dtype=kv_name, conv_dtype=r.mamba_conv_dtype or dtype,
        ssm_dtype=r.mamba_ssm_dtype or ssm_dtype or dtype, page_size=block, context=context, weights_bytes=weights,
        weights_source=weights_source, kv_bytes_per_token=attn_token * len(kv_layers),
        state_bytes_per_request=conv_state + ssm_state, conv_bytes_per_request=conv_state,
        ssm_bytes_per_request=ssm_state, kv_tokens=kv_tokens, state_slots=blocks if state_layers else 0,
        max_running_requests=running, requests_at_context=min(at_context, seqs), bottleneck=bottleneck,
        strategy=mode if state_layers else "none", state_slots_per_request=mamba_groups * per_state,
        kv_layers=len(kv_layers), state_layers=len(state_layers), all_attention=all_attention, breakdown=breakdown,
        notes=notes, problems=problems, assumed=assumed)
