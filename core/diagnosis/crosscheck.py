"""The pools an SGLang log says it allocated, against what `bringup plan` predicts for the same launch.

The log gives everything SGLang's sizing starts from: the memory free before and after loading the
weights ("Load weight begin/end. avail mem=..."), --mem-fraction-static, TP and the page size. So
`rest` is known exactly (rest = after - before x (1 - fraction)), and the planner's state slots and
KV tokens can be compared with the "Mamba Cache is allocated" / "KV Cache is allocated" lines.
"""

from __future__ import annotations

from bringup.core.errors import UserError
from bringup.core.layermap.vocabulary import LayerMap

from bringup.core.finding import Finding

GB = 1024**3
TOLERANCE = 0.02  # the log rounds memory to 0.01 GB


def _line_of(lines: list[str], needle: str) -> int | None:
    return next((i + 1 for i, line in enumerate(lines) if needle in line), None)


def _close(allocated: int, predicted: int) -> bool:
    return abs(allocated - predicted) <= max(2, TOLERANCE * max(allocated, predicted))


def pools_against_plan(facts: dict, layer_map: LayerMap, lines: list[str]) -> Finding | None:
    """An info finding when the log's pools match the plan, a warning when they differ, None when the
    log lacks what the comparison needs (or is our own engine's, which plans its pools itself)."""
    needed = ("avail_before_load_gb", "avail_after_load_gb", "mem_fraction_static")
    if any(k not in facts for k in needed) or not ("kv_tokens" in facts or "mamba_cache_size" in facts):
        return None
    if any(line.lstrip().startswith("Planner: ") or "] Planner: " in line for line in lines):
        return None  # the embedded engine's log: its pools come from plan_memory itself
    tp, pp = int(facts.get("tp_size") or 1), int(facts.get("pp_size") or 1)
    if pp != 1:
        return None  # per-stage figures are not in the log lines
    before, after = facts["avail_before_load_gb"] * GB, facts["avail_after_load_gb"] * GB
    from bringup.core.planner import plan_memory

    try:
        plan = plan_memory(
            layer_map, device_memory=int(before), mem_fraction=float(facts["mem_fraction_static"]),
            weights_bytes=int((before - after) * tp), target=f"sglang=={facts.get('sglang_version', '0.5.23')}",
            device=str(facts.get("device") or "cuda"), tp=tp,
            page_size=int(facts.get("page_size_changed_to") or facts.get("page_size") or 1),
            kv_dtype=facts.get("kv_cache_dtype_allocated"), ssm_dtype=facts.get("mamba_ssm_dtype"),
            disable_radix_cache=bool(facts.get("disable_radix_cache")),
            max_running_requests=facts.get("max_running_requests"),
        )
    except UserError:
        return None
    checks = []
    if "kv_tokens" in facts:
        checks.append(("KV tokens", int(facts["kv_tokens"]), plan.kv_tokens, _line_of(lines, "KV Cache is allocated")))
    if "mamba_cache_size" in facts and plan.state_layers:
        checks.append(("state slots", int(facts["mamba_cache_size"]), plan.state_slots,
                       _line_of(lines, "Mamba Cache is allocated")))
    if not checks:
        return None
    said = "; ".join(f"{name}: the log {got:,}, the plan {want:,}" for name, got, want, _ in checks)
    rest = after - before * (1 - float(facts["mem_fraction_static"]))
    lines_seen = tuple(sorted(n for *_, n in checks if n))
    common = dict(kind="log", lines=lines_seen, matched=lines[lines_seen[0] - 1].strip() if lines_seen else "", engine="sglang",
                  source="sglang kv_cache_configurator / DefaultPoolConfigurator; bringup plan",
                  details={name: {"log": got, "plan": want} for name, got, want, _ in checks})
    if all(_close(got, want) for _, got, want, _ in checks):
        return Finding(
            code="POOLS_MATCH_PLAN", severity="info", title="The allocated pools match bringup plan",
            explanation=f"From the log's own figures ({rest / GB:.2f} GB left for the pools after the weights under "
                        f"--mem-fraction-static={facts['mem_fraction_static']}), the planner predicts what SGLang "
                        f"allocated. {said}.",
            fix="Nothing to change; use bringup plan to try other settings before the next launch.", **common)
    return Finding(
        code="POOLS_DIFFER_FROM_PLAN", severity="warning", title="The allocated pools differ from bringup plan",
        explanation=f"With {rest / GB:.2f} GB left for the pools after the weights, the planner expects other "
                    f"sizes than the log shows. {said}. A state dtype, a --max-mamba-cache-size, speculative "
                    "decoding or a different --mamba-full-memory-ratio in this launch would explain it.",
        fix="Check the launch's --mamba-ssm-dtype, --mamba-full-memory-ratio and --max-mamba-cache-size; run "
            "bringup plan with the same settings.", **common)
