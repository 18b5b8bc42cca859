"""A memory plan as text for the terminal: figures, a one-line stacked bar, notes and problems."""

from __future__ import annotations

from bringup.core.layermap.sizes import format_bytes
from .memory_plan import MemoryPlan

BAR_CHARS = {"weights": "W", "kv_pool": "K", "swa_pool": "w", "state_pool": "S", "block_pool": "B", "reserve": "r",
             "free": "."}
BAR_WIDTH = 60


def stacked_bar(plan: MemoryPlan, width: int = BAR_WIDTH) -> str:
    total = sum(s.bytes for s in plan.breakdown) or 1
    cells = []
    for seg in plan.breakdown:
        n = round(seg.bytes / total * width)
        if seg.bytes and n == 0:
            n = 1
        cells.append(BAR_CHARS.get(seg.name, "?") * n)
    return ("".join(cells) + " " * width)[:width]


def render_text(plan: MemoryPlan) -> str:
    out = [f"{plan.model}: memory plan for {plan.target} on {plan.device}"]
    par = f", TP {plan.tp}, PP {plan.pp}" if plan.tp > 1 or plan.pp > 1 else ""
    out.append(f"  device memory     {format_bytes(plan.device_memory)} x mem fraction {plan.mem_fraction:.3f}{par}")
    out.append(f"  dtypes            weights {plan.dtype}, KV {plan.kv_dtype}, conv {plan.conv_dtype}, SSM {plan.ssm_dtype}")
    out.append(f"  weights           {format_bytes(plan.weights_bytes)} (from {plan.weights_source})")
    kv_of = "full-attention layers; the sliding ones in the SWA pool" if plan.swa_window else f"{plan.kv_layers} KV layers"
    out.append(f"  KV per token      {plan.kv_bytes_per_token:,} B ({kv_of})")
    if plan.state_layers:
        out.append(f"  state per request {format_bytes(plan.state_bytes_per_request)} "
                   f"(conv {format_bytes(plan.conv_bytes_per_request)} + SSM {format_bytes(plan.ssm_bytes_per_request)}, "
                   f"{plan.state_layers} state layers)")
    out.append(f"  KV tokens         {plan.kv_tokens:,} (page size {plan.page_size})")
    if plan.swa_window:  # the sliding layers' own pool: KV per token above counts the full layers only
        out.append(f"  SWA tokens        {plan.swa_tokens:,} ({plan.swa_bytes_per_token:,} B per token, "
                   f"window {plan.swa_window:,}: sliding layers keep only their window)")
    if plan.state_layers:
        per = f", {plan.state_slots_per_request} per running request ({plan.strategy})" if plan.strategy != "embedded" else ""
        out.append(f"  state slots       {plan.state_slots:,}{per}")
    out.append(f"  max running       {plan.max_running_requests:,} requests; bottleneck: {plan.bottleneck}")
    out.append(f"  at --context      {plan.requests_at_context:,} requests of {plan.context:,} tokens")
    if plan.chunked_prefill_size:  # the embedded engine's step budgets (the reasons: assumed/notes below)
        mixed = plan.mixed_prefill_size or plan.chunked_prefill_size
        out.append(f"  prompt per step   {plan.chunked_prefill_size:,} tokens, {mixed:,} beside decoding requests")
    if plan.all_attention:
        aa = plan.all_attention
        out.append(f"  if all attention  {aa.kv_bytes_per_token:,} B/token -> {aa.kv_tokens:,} KV tokens, "
                   f"{aa.requests_at_context:,} requests of {plan.context:,} tokens")
    out.append("")
    out.append(f"  [{stacked_bar(plan)}]")
    for seg in plan.breakdown:
        out.append(f"   {BAR_CHARS.get(seg.name, '?')} {format_bytes(seg.bytes):>12}  {seg.label}")
    if plan.pp > 1:
        out.append("")
        for s in plan.stages:
            tokens = "no KV layers" if s.kv_tokens is None else f"{s.kv_tokens:,} KV tokens"
            out.append(f"  stage {s.stage}: layers {s.layers[0]}-{s.layers[1]}, {s.kv_layers} KV, {s.state_layers} state, "
                       f"weights {format_bytes(s.weights_bytes)}, {tokens}, {s.state_slots:,} slots")
    for setting, value in plan.assumed.items():
        out.append(f"  assumed: {setting} = {value}")
    for note in plan.notes:
        out.append(f"  note: {note}")
    for problem in plan.problems:
        out.append(f"  DOES NOT FIT: {problem}")
    return "\n".join(out) + "\n"
