"""vLLM's block pool for a hybrid, with the device's memory known: how many blocks fit, and whether
`max_num_seqs` (vLLM's default for `vllm serve`) is above them, which stops graph capture.

vLLM's arithmetic (vllm_facts.py has the file:line): one pool of blocks; each block holds one page
(attention block x bytes per token = the padded Mamba state) for each of `group_size` layers;
num_blocks = KV memory // (page x group_size). Every decoding sequence holds one Mamba block per
Mamba group, and full CUDA graphs need max_num_seqs <= num_blocks.
"""

from __future__ import annotations

from bringup.core.finding import Finding
from bringup.core.layermap.vocabulary import LayerMap
from bringup.core.planner.dtypes import dtype_bytes
from bringup.core.planner.sizes import format_bytes
from bringup.core.rules import vllm_facts as F
from bringup.core.rules.check import Check

GIB = 1024**3


def default_max_num_seqs(device_memory: int) -> int:
    """`vllm serve`'s default: 1024 on devices of 70 GiB or more (A100 and GB10 aside), else 256."""
    return next(seqs for floor, seqs in F.MAX_NUM_SEQS_SERVE.value if device_memory >= floor * GIB)


def _max_model_len(layer_map: LayerMap) -> int | None:
    cfg = layer_map.config
    value = cfg.get("max_position_embeddings") or (cfg.get("text_config") or {}).get("max_position_embeddings")
    return int(value) if isinstance(value, int) and value > 0 else None


def _one_request(c: Check, layer_map: LayerMap, available: int, page: int, counts, base: str) -> Finding | None:
    """vLLM's start-up check that one request of --max-model-len fits, with its estimate of the length that does."""
    max_len = _max_model_len(layer_map)
    if not max_len:
        return None
    block = c.r.page_size
    per_state = 2 if c.r.mamba_strategy == "align" else 1
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
        engine_message=F.NEEDED_MESSAGE.format(max_len=max_len, need=need / GIB, have=max(available, 0) / GIB),
        layers=tuple(c.m.full_attention_layers), source=F.NEEDED_SOURCE, stage="memory pools (start-up)")


def memory_findings(c: Check, layer_map: LayerMap, device_memory: int, how: str = "") -> list[Finding]:
    """Weights against the budget, and max_num_seqs against the Mamba blocks (hybrids)."""
    s, r, m = c.s, c.r, c.m
    where = f" ({how})" if how else ""
    budget = int(device_memory * F.GPU_MEMORY_UTILIZATION.value)
    weights = layer_map.params_total * dtype_bytes(r.dtype if r.dtype != "auto" else "bfloat16") // (s.tp * s.pp)
    base = (f"on {s.device} with {format_bytes(device_memory)}{where}: weights {format_bytes(weights)} per device "
            f"(parameters x {r.dtype}), budget {format_bytes(budget)} (--gpu-memory-utilization "
            f"{F.GPU_MEMORY_UTILIZATION.value}, {F.GPU_MEMORY_UTILIZATION.source})")
    if weights >= budget:
        return [Finding.check("PLAN_WEIGHTS_DO_NOT_FIT", "error", f"The weights do not fit this device: {base}.",
                              fix="shard with --tensor-parallel-size / --pipeline-parallel-size, or use a device with "
                                  f"more than {format_bytes(int(weights / F.GPU_MEMORY_UTILIZATION.value))}",
                              engine_message="ValueError: No available memory for the cache blocks.",
                              source="vllm/v1/core/kv_cache_planning.py:56-64", stage="memory pools (start-up)")]
    page = c.derived.get("page_bytes")
    counts = c.derived.get("layer_counts")
    if not page or not counts:
        return [Finding.check("PLAN_FITS", "info", f"The weights fit: {base}; the rest holds the KV cache.",
                              source="core/rules/vllm_memory.py", stage="memory pools (start-up)")]
    too_long = _one_request(c, layer_map, budget - weights, page, counts, base)
    if too_long is not None:
        return [too_long]
    group = F.group_size(list(counts))
    blocks = (budget - weights) // (page * group)
    mamba_groups = -(-counts[1] // group)
    seqs = default_max_num_seqs(device_memory)
    figures = (f"{base}; {blocks:,} blocks of {r.page_size} tokens ({format_bytes(page)} page x {group} layers per "
               f"block, {counts[0]} attention and {counts[1]} state layers in groups of {group}; "
               f"{F.GROUP_SIZE_SOURCE}). Each running request holds {mamba_groups} Mamba blocks. Upper bound: vLLM "
               "also subtracts the profiling run's peak activations and graph memory")
    layers = tuple(m.state_layers)
    if blocks <= 0:
        return [Finding.check("PLAN_NO_REQUESTS", "error", f"No cache block fits: {figures}.",
                              fix="raise --gpu-memory-utilization, shard, or use a device with more memory",
                              engine_message="ValueError: No available memory for the cache blocks.", layers=layers,
                              source="vllm/v1/core/kv_cache_planning.py:56-64", stage="memory pools (start-up)")]
    if seqs > blocks:
        graphs = s.device != "xpu"  # XPU graphs only with a torch that supports them (platforms/xpu.py:383-390)
        return [Finding.check(
            "VLLM_MAX_SEQS_ABOVE_MAMBA_BLOCKS", "error" if graphs else "warning",
            f"vLLM's default max_num_seqs {seqs} is above the {blocks:,} Mamba cache blocks: {figures}."
            + ("" if graphs else " On XPU this fails only when XPU graphs are on; otherwise requests queue."),
            fix=f"pass --max-num-seqs {blocks} (or fewer), or raise --gpu-memory-utilization",
            engine_message=F.MAX_SEQS_MESSAGE.format(seqs=seqs, blocks=blocks), layers=layers,
            source=F.MAX_SEQS_SOURCE + "; " + F.MAX_NUM_SEQS_SERVE.source, stage="graph capture (start-up)")]
    return [Finding.check("PLAN_FITS", "info", f"The block pool holds the default max_num_seqs {seqs}: {figures}.",
                          source=F.GROUP_SIZE_SOURCE, stage="memory pools (start-up)")]
