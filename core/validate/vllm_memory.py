"""vLLM's block pool for a hybrid, with the device's memory known: Validate plans the launch with vLLM's
own arithmetic (core/planner/vllm.py, the same plan `bringup plan --target vllm==X` prints) and turns what
stops vLLM at start-up into findings: weights that leave no cache memory, one request of max_model_len
that does not fit, and `max_num_seqs` above the Mamba cache blocks, which stops graph capture.
"""

from __future__ import annotations

from math import ceil

from bringup.core.errors import UserError
from bringup.core.finding import Finding
from bringup.core.layermap.vocabulary import LayerMap
from bringup.core.planner.budget import config_context
from bringup.core.layermap.sizes import format_bytes
from bringup.core.planner.vllm import default_max_num_seqs
from bringup.core.rules import vllm_facts as F
from bringup.core.rules.check import Check

_TRY_TP = (2, 4, 8)
STAGE = "memory pools (start-up)"


def _plan(c: Check, layer_map: LayerMap, device_memory: int, tp: int | None = None):
    from bringup.core.planner import plan_memory

    s = c.s
    return plan_memory(layer_map, device_memory=device_memory, target=f"vllm=={c.derived['version']}",
                       device=s.device, tp=tp or s.tp, pp=s.pp, dtype=None if s.dtype == "auto" else s.dtype,
                       kv_dtype=None if s.kv_dtype == "auto" else s.kv_dtype, ssm_dtype=s.mamba_ssm_dtype,
                       page_size=s.page_size, disable_radix_cache=s.disable_radix_cache)


def _bigger_tp(c: Check, layer_map: LayerMap, device_memory: int) -> str:
    """The smallest TP size the heads divide that the plan says fits, in vLLM's flag."""
    m = c.m
    for tp in _TRY_TP:
        if tp <= c.s.tp or any(n and n % tp for n in (m.attention_heads, m.mamba_heads)):
            continue
        try:
            plan = _plan(c, layer_map, device_memory, tp)
        except UserError:
            break
        if plan.ok and plan.max_running_requests > 0:
            return (f"--tensor-parallel-size {tp} fits on {tp} such devices: {plan.kv_tokens:,} KV tokens, "
                    f"{plan.max_running_requests} running requests (bottleneck {plan.bottleneck})")
    return ""


def _one_request(c: Check, layer_map: LayerMap, plan, available: int, base: str) -> Finding | None:
    """vLLM's start-up check that one request of --max-model-len fits, with its estimate of the length that does."""
    page, counts = c.derived.get("page_bytes"), c.derived.get("layer_counts")
    max_len = config_context(layer_map)
    if not page or not counts or not max_len:
        return None
    block = plan.page_size
    per_state = F.MAMBA_BLOCKS_PER_REQUEST.value.get(plan.strategy, 1)
    state_bytes = counts[1] * per_state * page
    need = counts[0] * -(-max_len // block) * page + state_bytes
    if need <= available:
        return None
    fits = max(0, (available - state_bytes) // (counts[0] * page)) * block
    return Finding.check(
        "VLLM_KV_TOO_SMALL_FOR_MAX_LEN", "error",
        f"One request of the model's {max_len:,} tokens needs {format_bytes(need)} of cache, {base}; "
        f"{format_bytes(max(available, 0))} are left after the weights.",
        fix=(f"pass --max-model-len {fits} (or less)" if fits else "use a device with more memory or shard") +
            ", raise --gpu-memory-utilization, or shard with --tensor-parallel-size",
        engine_message=F.NEEDED_MESSAGE.format(max_len=max_len, need=need / 1024**3, have=max(available, 0) / 1024**3),
        layers=tuple(c.m.full_attention_layers), source=F.NEEDED_SOURCE, stage=STAGE)


def memory_findings(c: Check, layer_map: LayerMap, device_memory: int, how: str = "") -> tuple[list[Finding], object]:
    """(findings, plan): the weights against the budget, and max_num_seqs against the Mamba blocks (hybrids)."""
    s, r, m = c.s, c.r, c.m
    plan = _plan(c, layer_map, device_memory)
    where = f" ({how})" if how else ""
    requested = ceil(device_memory * plan.mem_fraction)  # as vLLM asks (vllm_facts.REQUESTED_MEMORY_SOURCE)
    available = requested - plan.weights_bytes
    base = (f"on {s.device} with {format_bytes(device_memory)}{where}: weights {format_bytes(plan.weights_bytes)} per "
            f"device (parameters x {plan.dtype}), budget {format_bytes(requested)} (--gpu-memory-utilization "
            f"{plan.assumed.get('gpu_memory_utilization', plan.mem_fraction)})")
    if available <= 0:
        bigger = _bigger_tp(c, layer_map, device_memory)
        return [Finding.check("PLAN_WEIGHTS_DO_NOT_FIT", "error", f"The weights do not fit this device: {base}.",
                              fix=bigger or "shard with --tensor-parallel-size / --pipeline-parallel-size, or use a "
                                            f"device with more than {format_bytes(int(plan.weights_bytes / plan.mem_fraction))}",
                              engine_message="ValueError: No available memory for the cache blocks.",
                              source="vllm/v1/core/kv_cache_planning.py:56-64", stage=STAGE)], plan
    if not plan.state_layers or "page_bytes" not in c.derived:
        return [Finding.check("PLAN_FITS", "info", f"The weights fit: {base}; {plan.kv_tokens:,} KV tokens, "
                              f"{plan.max_running_requests} running requests.",
                              source="core/planner/vllm.py", stage=STAGE)], plan
    too_long = _one_request(c, layer_map, plan, available, base)
    if too_long is not None:
        return [too_long], plan
    blocks = plan.state_slots  # the pool's blocks: every one can hold a Mamba state
    group = F.group_size([plan.kv_layers, plan.state_layers])
    figures = (f"{base}; {blocks:,} blocks of {plan.page_size} tokens ({format_bytes(c.derived['page_bytes'])} page x "
               f"{group} layers per block, {plan.kv_layers} attention and {plan.state_layers} state layers in groups "
               f"of {group}; {F.GROUP_SIZE_SOURCE}). "
               f"Each running request holds {plan.state_slots_per_request} Mamba blocks "
               f"(mamba_cache_mode {plan.strategy}). Upper bound: vLLM also subtracts the profiling run's peak "
               "activations and graph memory")
    layers = tuple(m.state_layers)
    if blocks <= 0:
        return [Finding.check("PLAN_NO_REQUESTS", "error", f"No cache block fits: {figures}.",
                              fix="raise --gpu-memory-utilization, shard, or use a device with more memory",
                              engine_message="ValueError: No available memory for the cache blocks.", layers=layers,
                              source="vllm/v1/core/kv_cache_planning.py:56-64", stage=STAGE)], plan
    seqs = default_max_num_seqs(device_memory)
    if seqs > blocks and c.derived["version"] >= F.MAX_SEQS_CHECK_SINCE.value:
        graphs = s.device != "xpu"  # XPU graphs only with a torch that supports them (platforms/xpu.py:383-390)
        return [Finding.check(
            "VLLM_MAX_SEQS_ABOVE_MAMBA_BLOCKS", "error" if graphs else "warning",
            f"vLLM's default max_num_seqs {seqs} is above the {blocks:,} Mamba cache blocks: {figures}."
            + ("" if graphs else " On XPU this fails only when XPU graphs are on; otherwise requests queue."),
            fix=f"pass --max-num-seqs {blocks} (or fewer), or raise --gpu-memory-utilization",
            engine_message=F.MAX_SEQS_MESSAGE.format(seqs=seqs, blocks=blocks), layers=layers,
            source=F.MAX_SEQS_SOURCE + "; " + F.MAX_NUM_SEQS_SERVE.source, stage="graph capture (start-up)")], plan
    return [Finding.check("PLAN_FITS", "info", f"The block pool holds the default max_num_seqs {seqs}: {figures}; "
                          f"{plan.max_running_requests} running requests (bottleneck {plan.bottleneck}).",
                          source=F.GROUP_SIZE_SOURCE, stage=STAGE)], plan
