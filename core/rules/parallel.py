"""Tensor and pipeline parallel rules: head counts must split evenly over TP ranks; PP stages and
what they hold (notes §1.3, §2.3, §2.5)."""

from __future__ import annotations

from bringup.core.rules import messages as msg
from bringup.core.rules.check import Check

DIVIDE_SOURCE = "distributed/utils.py divide() / ensure_divisibility"


def check_tp(c: Check) -> None:
    m, tp = c.m, c.s.tp
    if tp == 1:
        return
    attn = tuple(m.full_attention_layers)
    if m.attention_heads and m.full_attention_layers and m.attention_heads % tp:
        c.add("TP_ATTENTION_HEADS", "error",
              f"{m.attention_heads} attention heads do not split over {tp} TP ranks: each rank must hold whole heads.",
              fix=f"use a --tp that divides {m.attention_heads}: {_divisors(m.attention_heads, tp)}",
              engine_message="AssertionError", layers=attn,
              source="model attention layers: assert total_num_heads % tp_size == 0", stage="model load")
    kv = m.kv_heads
    if kv and m.full_attention_layers:
        if kv >= tp and kv % tp:
            c.add("TP_KV_HEADS", "error", f"{kv} KV heads do not split over {tp} TP ranks.",
                  fix=f"use a --tp that divides {kv} or that {kv} divides", engine_message="AssertionError", layers=attn,
                  source="model attention layers: assert total_num_kv_heads % tp_size == 0", stage="model load")
        elif kv < tp and tp % kv:
            c.add("TP_KV_HEADS", "error", f"{kv} KV heads cannot be replicated evenly over {tp} TP ranks.",
                  fix=f"use a --tp that is a multiple of {kv}", engine_message="AssertionError", layers=attn,
                  source="model attention layers: assert tp_size % total_num_kv_heads == 0", stage="model load")
        elif kv < tp:
            c.add("TP_KV_REPLICATED", "info",
                  f"{kv} KV heads for {tp} TP ranks: each KV head is replicated on {tp // kv} ranks, so the KV cache per "
                  f"token does not shrink past TP {kv} (n_kv_heads_per_tp = max(1, {kv} // {tp}) = 1).",
                  layers=attn, source="mem_cache pool configurator (cell_size)")
    state = tuple(m.state_layers)
    if m.mamba_heads and m.mamba_heads % tp:
        c.add("TP_MAMBA_HEADS", "error",
              f"{m.mamba_heads} mamba / linear-attention heads do not split over {tp} TP ranks: the state shape divides "
              "them exactly.", fix=f"use a --tp that divides {m.mamba_heads}: {_divisors(m.mamba_heads, tp)}",
              engine_message=msg.DIVISIBLE.format(num=m.mamba_heads, den=tp), layers=state,
              source=f"configs/mamba_utils.py Mamba2StateShape.create; {DIVIDE_SOURCE}", stage="model load")
    if m.mamba_groups and m.mamba_groups % tp:
        padded = -(-m.mamba_groups // tp) * tp
        c.add("TP_MAMBA_GROUPS_PADDED", "info",
              f"{m.mamba_groups} mamba groups do not split over {tp} TP ranks; SGLang pads them to {padded} "
              "(extra_groups_for_head_shards), which grows the conv state.",
              layers=state, source="configs/mamba_utils.py extra_groups_for_head_shards")


def _divisors(n: int, near: int) -> str:
    ds = [d for d in range(1, n + 1) if n % d == 0 and d <= max(8, near * 2)]
    return ", ".join(map(str, ds))


def check_pp(c: Check) -> None:
    m, pp = c.m, c.s.pp
    if pp == 1:
        return
    for stage in range(pp):
        layers = [i for i, st in enumerate(m.stage_of) if st == stage]
        span = f"layers {layers[0]}-{layers[-1]}" if layers else "no layers"
        if m.full_attention_layers and not m.attention_layers_of_stage(stage):
            c.add("PP_STAGE_WITHOUT_ATTENTION", "info",
                  f"PP stage {stage} ({span}) holds no attention layer: its KV cell size is 0, its token limit is "
                  "int64-max and the all_reduce(MIN) across stages picks the real limit. It still holds "
                  f"{len(m.state_layers_of_stage(stage))} state layers.",
                  layers=tuple(layers), source="model_executor/pool_configurator.py (PP slicing)")
    shares = [len(m.state_layers_of_stage(st)) for st in range(pp)]
    if m.state_layers and len(set(shares)) > 1:
        c.add("PP_STATE_SHARE", "info",
              f"State layers per PP stage: {shares}; mamba sizing charges the largest share ({max(shares)}) on every stage.",
              layers=tuple(m.state_layers), source="kv_cache_configurator.py (pp_layer_scale)")
