"""Validate includes the plan: with a device's memory known (`--device-memory`, or the probe), the
launch Validate approves is planned with the same settings, and one whose weights do not fit or
that plans zero running requests is an error with the plan's numbers and the fix."""

from __future__ import annotations

from bringup.core.errors import UserError
from bringup.core.finding import Finding
from bringup.core.layermap.vocabulary import LayerMap
from bringup.core.layermap.sizes import format_bytes
from bringup.core.rules.model_facts import ModelFacts
from bringup.core.rules.settings import LaunchSettings, Resolved

SOURCE = "bringup plan (core/planner/); the engine's own pool sizing it follows"
_TRY_TP = (2, 4, 8)


def _plan_args(target_label: str, s: LaunchSettings, r: Resolved, device_memory: int) -> dict:
    args = dict(device_memory=device_memory, target=target_label, device="cuda" if s.device == "rocm" else s.device,
                tp=s.tp, pp=s.pp, dtype=None if s.dtype == "auto" else s.dtype,
                kv_dtype=None if s.kv_dtype == "auto" else s.kv_dtype, ssm_dtype=s.mamba_ssm_dtype,
                page_size=r.page_size)
    if target_label.startswith("sglang"):
        if r.mamba_strategy:
            args["mamba_strategy"] = r.mamba_strategy
        if s.disable_radix_cache:
            args["disable_radix_cache"] = True
        if s.disable_overlap_schedule:
            args["disable_overlap_schedule"] = True
    return args


def _divides(m: ModelFacts, tp: int) -> bool:
    return all(not n or n % tp == 0 for n in (m.attention_heads, m.mamba_heads)) and \
        (not m.kv_heads or m.kv_heads % tp == 0 or tp % m.kv_heads == 0)


def _figures(plan) -> str:
    return (f"weights {format_bytes(plan.weights_bytes)} per device ({plan.weights_source}), budget "
            f"{format_bytes(int(plan.device_memory * plan.mem_fraction))} ({plan.mem_fraction:.3f} of "
            f"{format_bytes(plan.device_memory)}); KV {plan.kv_tokens:,} tokens, {plan.state_slots} state slots, "
            f"{plan.max_running_requests} running requests (bottleneck: {plan.bottleneck})")


def _fix(layer_map: LayerMap, m: ModelFacts, plan, args: dict) -> str:
    """The smallest change the planner says fits: a TP size the heads divide, else the memory needed."""
    from bringup.core.planner import plan_memory

    if not args["target"].startswith("embedded"):
        for tp in _TRY_TP:
            if tp <= args["tp"] or not _divides(m, tp):
                continue
            try:
                bigger = plan_memory(layer_map, **{**args, "tp": tp})
            except UserError:
                break
            if bigger.ok and bigger.max_running_requests > 0:
                return (f"--tp {tp} fits on {tp} such devices: {bigger.kv_tokens:,} KV tokens, "
                        f"{bigger.max_running_requests} running requests (bottleneck {bigger.bottleneck}).")
    need = plan.weights_bytes / max(plan.mem_fraction, 1e-9)
    return (f"Use a device with well over {format_bytes(int(need))} (the weights over the mem fraction), shard the "
            "weights (--tp / --pp), or a smaller dtype.")


def plan_findings(layer_map: LayerMap, m: ModelFacts, target_label: str, s: LaunchSettings, r: Resolved,
                  device_memory: int, how: str = "") -> tuple[list[Finding], object | None]:
    """(findings, the plan) for this launch on a device of `device_memory` bytes."""
    from bringup.core.planner import plan_memory

    args = _plan_args(target_label, s, r, device_memory)
    where = f" ({how})" if how else ""
    try:
        plan = plan_memory(layer_map, **args)
    except UserError as err:
        return [Finding.check("PLAN_NOT_MADE", "warning", f"The memory plan could not be made for this launch: {err}",
                              fix="run bringup plan with the same settings to see why", source=SOURCE)], None
    if not plan.ok or plan.max_running_requests <= 0:
        weights = plan.bottleneck == "weights"
        code = "PLAN_WEIGHTS_DO_NOT_FIT" if weights else "PLAN_NO_REQUESTS"
        what = ("The weights do not fit this device" if weights
                else "The pools on this device hold no running request")
        problems = " ".join(p.rstrip(".") + "." for p in plan.problems)
        layers = () if weights else tuple(m.state_layers if plan.bottleneck == "state" else m.full_attention_layers)
        return [Finding.check(
            code, "error", f"{what}: on {plan.device} with {format_bytes(device_memory)}{where}, {_figures(plan)}. "
            + problems, fix=_fix(layer_map, m, plan, args),
            layers=layers, source=SOURCE, stage="memory pools (start-up)")], plan
    return [Finding.check(
        "PLAN_FITS", "info", f"On {plan.device} with {format_bytes(device_memory)}{where}: {_figures(plan)}.",
        source=SOURCE, stage="memory pools (start-up)")], plan
