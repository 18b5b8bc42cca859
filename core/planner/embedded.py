"""Pool sizing for our embedded engine: the same function predicts and allocates.

The engine runs on one device with two pools: a paged KV pool over the KV layers and a state pool
of per-request slots (one slot per running request: no radix cache, so no extra snapshot slots).
Rule: weights + KV pages + state slots fit `device_memory * mem_fraction`.

Each request is planned to be able to reach `context` tokens, so a request that holds a slot
never waits for KV pages: `max_running_requests` = how many (state slot + `context` tokens of KV)
fit in the pool budget, capped by the requested `max_running_requests`. KV left over after the
slots goes to KV pages up to `max_running_requests * context` tokens (more could never be used).

A model with sliding-window layers beside full ones (Gemma 2/3, gpt-oss) gets a third pool, the
SWA pool, as SGLang does: the sliding layers keep only their window, so a request costs the full
layers' KV for `context` tokens plus the sliding layers' KV for its window (and a page either
side), and the pool keeps room for one prefill chunk more.

Defaults, chosen for this engine:
- GPU (cuda, xpu, ...): reserve max(1 GiB, 10 %) of the device for activations, the allocator and
  workspaces, plus 2 GiB more on XPU (oneDNN scratch, as SGLang reserves). Up to 256 running
  requests of up to 8,192 tokens (or the model's context if shorter).
- CPU: `device_memory` is the host memory available; the pools take 25 % of what the weights
  leave, and never more than 4 GiB, so a tiny test model never allocates gigabytes; up to 8
  running requests of up to 4,096 tokens.
"""

from __future__ import annotations

from bringup.core.engine.facts import DEFAULT_PAGE_SIZE
from bringup.core.layermap.vocabulary import LayerMap

from bringup.core.layermap import geometry
from .budget import config_context, page_ceil, page_floor
from bringup.core.layermap.sizes import format_bytes
from .memory_plan import Capacity, MemoryPlan, Segment
from .step_budget import mixed_budget, prefill_budget

GIB = 1024**3
CPU_POOL_SHARE = 0.25
CPU_POOL_CAP = 4 * GIB
GPU_RESERVE_SHARE = 0.10
GPU_RESERVE_MIN = 1 * GIB
XPU_EXTRA_RESERVE = 2 * GIB
DEFAULT_MAX_RUNNING = {"cpu": 8}
DEFAULT_MAX_RUNNING_GPU = 256
DEFAULT_CONTEXT = {"cpu": 4096}
DEFAULT_CONTEXT_GPU = 8192


def swa_layers(layers) -> tuple[list, int]:
    """(sliding layers, window) when they get their own pool: sliding layers with a window beside
    full-attention ones; else ([], 0) and every attention layer counts in the KV pool."""
    sliding = [l for l in layers if l.mixer == "sliding_attention" and l.is_kv and l.attention and l.attention.window]
    full = [l for l in layers if l.is_kv and l not in sliding]
    if not sliding or not full:
        return [], 0
    return sliding, max(l.attention.window for l in sliding)


def swa_tokens_per_request(window: int, page_size: int, context_tokens: int) -> int:
    """SWA tokens one decoding request holds at most: its window's pages and one more either side."""
    return min(context_tokens, (-(-(window - 1) // page_size) + 2) * page_size)


def auto_mem_fraction(device: str, device_memory: int, weights_bytes: int) -> float:
    """The share of `device_memory` that weights and pools may use, when none was given."""
    if device == "cpu":
        pools = min(CPU_POOL_SHARE * max(0, device_memory - weights_bytes), CPU_POOL_CAP)
        return min(0.9, (weights_bytes + pools) / device_memory)
    reserve = max(GPU_RESERVE_MIN, GPU_RESERVE_SHARE * device_memory)
    if device == "xpu":
        reserve += XPU_EXTRA_RESERVE
    return max(0.0, (device_memory - reserve) / device_memory)


def _fit(pool_bytes: int, per_state: int, cell: int, context: int, page_size: int, cap: int) -> tuple[int, int, str]:
    """(requests, kv_tokens, bottleneck) for a pool budget; each request = one slot + `context` tokens."""
    if pool_bytes <= 0:
        return 0, 0, "weights"
    ctx_tokens = page_ceil(context, page_size) if cell else 0
    cost = per_state + ctx_tokens * cell
    if cost == 0:  # a model without caches: nothing to size
        return cap, 0, "max_running_requests"
    fits = max(0, pool_bytes) // cost
    if fits >= cap:
        return cap, cap * ctx_tokens, "max_running_requests"
    requests = fits
    kv_tokens = 0
    if cell:
        kv_tokens = min(page_floor((pool_bytes - requests * per_state) // cell, page_size), cap * ctx_tokens)
    return requests, kv_tokens, "state" if per_state >= ctx_tokens * cell else "kv"


def plan_embedded(
    layer_map: LayerMap, *, device: str, device_memory: int, mem_fraction: float | None, weights_bytes: int,
    weights_source: str, dtype: str, kv_dtype: str, conv_dtype: str, ssm_dtype: str, dtype_bytes,
    page_size: int | None, context: int | None, max_running_requests: int | None,
    chunked_prefill_size: int | None = None, mixed_prefill_size: int | None = None,
) -> MemoryPlan:
    notes: list[str] = []
    problems: list[str] = []
    page_size = page_size or DEFAULT_PAGE_SIZE
    model_context = config_context(layer_map)
    if context is None:
        default = DEFAULT_CONTEXT.get(device, DEFAULT_CONTEXT_GPU)
        context = min(default, model_context) if model_context else default
        notes.append(f"pools planned for requests of up to {context} tokens (--context to change)")
    cap = max_running_requests or DEFAULT_MAX_RUNNING.get(device, DEFAULT_MAX_RUNNING_GPU)
    assumed = {}
    chunk = chunked_prefill_size
    if chunk is None:
        chunk, why = prefill_budget(layer_map, device=device, weights_bytes=weights_bytes)
        assumed["chunked_prefill_size"] = f"{chunk} ({why})"
        notes.append(f"prompt tokens per step {chunk:,} when no running request decodes: {why}")
    mixed = mixed_prefill_size
    if mixed is None:
        mixed, why = mixed_budget(layer_map, device=device, weights_bytes=weights_bytes, chunk=chunk)
        assumed["mixed_prefill_size"] = f"{mixed} ({why})"
        notes.append(f"prompt tokens per step {mixed:,} beside the decode rows: {why}")
    elif mixed > chunk:
        notes.append(f"--mixed-prefill-size {mixed:,} is capped at the chunk, {chunk:,} prompt tokens per step")
        mixed = chunk
    if mem_fraction is None:
        mem_fraction = auto_mem_fraction(device, device_memory, weights_bytes)
        notes.append(f"mem fraction {mem_fraction:.3f} chosen for {device} (see core/planner/embedded.py)")
    budget = int(device_memory * mem_fraction)
    pool_bytes = budget - weights_bytes
    if pool_bytes <= 0:
        problems.append(
            f"the weights ({format_bytes(weights_bytes)}) leave no room for the KV and state pools in "
            f"{format_bytes(budget)} ({mem_fraction:.2f} of {format_bytes(device_memory)}); use a device with more "
            "memory, raise the mem fraction, or a smaller dtype"
        )

    layers = layer_map.layers
    kv_b, conv_b, ssm_b = dtype_bytes(kv_dtype), dtype_bytes(conv_dtype), dtype_bytes(ssm_dtype)
    sliding, window = swa_layers(layers)
    cell = geometry.kv_bytes_per_token([l for l in layers if l not in sliding], 1, kv_b)
    conv, ssm = geometry.state_bytes_per_request(layers, 1, conv_b, ssm_b)
    per_state = conv + ssm
    swa_cell = geometry.kv_bytes_per_token(sliding, 1, kv_b)
    swa_per_request = swa_tokens_per_request(window, page_size, page_ceil(context, page_size)) if sliding else 0
    swa_chunk = page_ceil(min(chunk, context), page_size) if sliding else 0
    # Each request's window rides with its state slot; the chunk's room comes off the top.
    requests, kv_tokens, bottleneck = _fit(pool_bytes - swa_chunk * swa_cell, per_state + swa_per_request * swa_cell,
                                           cell, context, page_size, cap)
    swa_tokens = requests * swa_per_request + swa_chunk if requests else 0
    if sliding:
        notes.append(f"{len(sliding)} sliding-window layers (window {window}) keep only their window in the SWA pool: "
                     f"{swa_per_request} tokens per request plus {swa_chunk} for a prefill chunk")
    if pool_bytes > 0 and requests == 0:
        need = per_state + page_ceil(context, page_size) * cell
        problems.append(
            f"one request of {context} tokens needs {format_bytes(need)} of pools but only "
            f"{format_bytes(pool_bytes)} is left after the weights; lower --context or give the pools more memory"
        )
    state_slots = requests if per_state else 0

    all_attention = None
    attn_elems = geometry.attention_kv_elems(layers, 1)
    if attn_elems is not None:
        all_cell = attn_elems * len(geometry.mixer_layers(layers)) * kv_b
        a_req, a_tokens, a_neck = _fit(pool_bytes, 0, all_cell, context, page_size, cap)
        all_attention = Capacity(all_cell, 0, a_tokens, 0, a_req, a_req, a_neck)

    kv_pool = kv_tokens * cell
    state_pool = state_slots * per_state
    swa_pool = swa_tokens * swa_cell
    used = weights_bytes + kv_pool + state_pool + swa_pool
    breakdown = [
        Segment("weights", weights_bytes, f"weights {format_bytes(weights_bytes)}"),
        Segment("kv_pool", kv_pool, f"KV pool {kv_tokens:,} tokens"),
        *([Segment("swa_pool", swa_pool, f"SWA pool {swa_tokens:,} tokens (window {window})")] if sliding else []),
        Segment("state_pool", state_pool, f"state pool {state_slots:,} slots"),
        Segment("reserve", device_memory - budget, "reserve (activations, allocator)"),
        Segment("free", max(0, budget - used), "free (pools capped by max_running_requests x context)"),
    ]
    return MemoryPlan(
        model=layer_map.name, target="embedded", device=device, device_memory=device_memory,
        mem_fraction=mem_fraction, tp=1, pp=1, dtype=dtype, kv_dtype=kv_dtype, conv_dtype=conv_dtype,
        ssm_dtype=ssm_dtype, page_size=page_size, context=context, weights_bytes=weights_bytes,
        weights_source=weights_source, kv_bytes_per_token=cell, state_bytes_per_request=per_state,
        conv_bytes_per_request=conv, ssm_bytes_per_request=ssm, kv_tokens=kv_tokens, state_slots=state_slots,
        max_running_requests=requests, requests_at_context=requests, bottleneck=bottleneck, strategy="embedded",
        state_slots_per_request=1 if per_state else 0, kv_layers=len(layer_map.kv_layers),
        state_layers=len(layer_map.state_layers), all_attention=all_attention, breakdown=breakdown,
        notes=notes, problems=problems, swa_tokens=swa_tokens, swa_bytes_per_token=swa_cell, swa_window=window,
        assumed=assumed, chunked_prefill_size=chunk, mixed_prefill_size=mixed,
    )
