"""What the Plan tab writes: bar segments, card notes and the all-attention comparison, from a
`MemoryPlan` (core/planner/memory_plan.py). Plain functions (no widgets), so the wording can be read and tested on its own."""

from __future__ import annotations

import re

from bringup.core.layermap.sizes import format_bytes

from .plan_widgets import Segment, fmt_count

# The plan's breakdown names -> what the bar calls them, and their colours.
SEGMENT_NAMES = {"weights": "Weights", "kv_pool": "KV pool", "swa_pool": "SWA pool", "state_pool": "State pool",
                 "block_pool": "Block pool", "reserve": "Reserve", "free": "Free"}
SEGMENT_COLOURS = {
    "weights": "#6B7A99",
    "kv_pool": "#E8913A",  # the layer map's attention colour: the KV pool serves the attention layers
    "swa_pool": "#E0B04A",  # as the Run tab's SWA graph: the sliding-window layers' window
    "state_pool": "#4F86B8",  # the layer map's Mamba2 colour: the state pool serves the recurrent layers
    "block_pool": "#B07A8C",  # vLLM's one pool, attention and Mamba blocks alike: neither kind's colour
    "reserve": "#C9CED6",
    "free": "#EEF0F3",
}


def plan_segments(plan) -> list[Segment]:
    """The plan's own breakdown (weights / KV pool / state pool / reserve / free) as bar segments."""
    weights_from = {"checkpoint": "from the checkpoint", "params": "from the parameter count"}
    notes = {
        "weights": weights_from.get(plan.weights_source, ""),
        "kv_pool": f"{fmt_count(plan.kv_tokens)} tokens",
        "state_pool": f"{fmt_count(plan.state_slots)} slots",
        "swa_pool": f"{fmt_count(plan.swa_tokens)} tokens, window {plan.swa_window}",
    }
    return [
        Segment(SEGMENT_NAMES.get(seg.name, seg.name), seg.bytes, SEGMENT_COLOURS.get(seg.name, "#9aa3b2"),
                notes.get(seg.name, seg.label if seg.name == "block_pool" else ""))
        for seg in plan.breakdown
    ]


_BOTTLENECKS = {"kv": "KV cache", "state": "State slots", "max_running_requests": "Request cap"}


def busiest_stage(plan) -> int | None:
    """The stage the plan's per-device figures are for (its note names it), else the heaviest."""
    for note in plan.notes or []:
        match = re.search(r"busiest stage \(stage (\d+)\)", str(note))
        if match:
            return int(match.group(1))
    stages = plan.stages or []
    return max(stages, key=lambda s: s.weights_bytes).stage if stages else None


def bottleneck_name(bottleneck) -> str:
    return _BOTTLENECKS.get(bottleneck, str(bottleneck or "\u2014"))


def bottleneck_note(plan) -> str:
    b = plan.bottleneck
    if b == "kv":
        return "KV tokens run out before state slots"
    if b == "state":
        return "state slots run out before KV tokens"
    if b == "max_running_requests":
        return "the engine's request cap, not memory"
    return ""


def running_note(plan) -> str:
    parts = []
    if plan.requests_at_context is not None and plan.context:
        parts.append(f"{fmt_count(plan.requests_at_context)} at a full {fmt_count(plan.context)}-token context")
    ratio = plan.state_slots_per_request
    if ratio:
        parts.append(f"{ratio} state slot{'s' if ratio != 1 else ''} each ({plan.strategy})")
    return "; ".join(parts)


def comparison_html(plan, layer_map) -> tuple[str, str]:
    """The same memory if every layer were attention (the reason hybrids exist): a table of
    figures, and what they mean in a few sentences."""
    other = plan.all_attention
    if other is None:
        return "", "<span style='color:#6b7280'>No all-attention comparison for this plan.</span>"
    # Only mixer layers would change (MoE and MLP layers hold no cache): "all 29", not the map's 52.
    mixers = (plan.kv_layers or 0) + (plan.state_layers or 0)
    ours_req = plan.max_running_requests
    theirs_req = other.max_running_requests
    ours_tok = plan.kv_bytes_per_token or 0
    theirs_tok = other.kv_bytes_per_token or 0
    rows = [
        ("KV bytes per token", format_bytes(ours_tok, short=True), format_bytes(theirs_tok, short=True)),
        ("KV tokens", fmt_count(plan.kv_tokens), fmt_count(other.kv_tokens)),
        ("Max running requests", fmt_count(ours_req), fmt_count(theirs_req)),
        (f"Requests at a full {fmt_count(plan.context)}-token context",
         fmt_count(plan.requests_at_context), fmt_count(other.requests_at_context)),
    ]
    context = plan.context or 0
    ours_req_bytes = context * ours_tok + (plan.state_bytes_per_request or 0)
    theirs_req_bytes = context * theirs_tok + (other.state_bytes_per_request or 0)
    if context:
        rows.insert(1, ("Cache per request at full context", format_bytes(ours_req_bytes, short=True), format_bytes(theirs_req_bytes, short=True)))
    head = ("<tr><th></th><th align='right' style='padding:0 10px'>this hybrid</th>"
            f"<th align='right' style='padding:0 10px'>all {mixers} mixer layers attention</th></tr>")
    body = "".join(
        f"<tr><td>{a}</td><td align='right' style='padding:0 10px'><b>{b}</b></td>"
        f"<td align='right' style='padding:0 10px'>{c}</td></tr>" for a, b, c in rows
    )
    sentences = []
    if ours_tok and theirs_tok:
        sentences.append(f"Each token costs <b>{theirs_tok / ours_tok:.1f}\u00d7</b> less KV memory than it would "
                         "if every layer kept a KV cache.")
    ours_ctx, theirs_ctx = plan.requests_at_context, other.requests_at_context
    if context and ours_ctx is not None and theirs_ctx is not None and ours_ctx != theirs_ctx:
        gain = f" ({ours_ctx / theirs_ctx:.1f}\u00d7)" if theirs_ctx else ""
        sentences.append(f"At a full {fmt_count(context)}-token context the same memory holds <b>{fmt_count(ours_ctx)}</b> "
                         f"requests instead of {fmt_count(theirs_ctx)}{gain}.")
    if ours_req is not None and theirs_req is not None and ours_req < theirs_req and plan.bottleneck == "state":
        slots = plan.state_slots_per_request or 1
        sentences.append(f"Short requests are capped by state slots instead: each running request holds {slots} "
                         f"slot{'s' if slots != 1 else ''} ({plan.strategy}).")
    return f"<table cellspacing='0' cellpadding='2'>{head}{body}</table>", " ".join(sentences)


def assumed_text(assumed: dict) -> str:
    """'Assumed: chunked_prefill_size = 2048 (sglang 0.5.20 default for devices below 20 GB); ...': the
    target defaults the plan took, without their source lines (those go in the tooltip)."""
    if not assumed:
        return ""
    parts = []
    for setting, value in assumed.items():
        head, _, why = value.partition(" (")
        why = why.split(";")[0].rstrip(")").split(" = ")[0]  # the reason without its arithmetic (in the tooltip)
        parts.append(f"{setting} = {head}" + (f" ({why})" if why else ""))
    return "Assumed: " + "; ".join(parts)
