"""`bringup inspect SOURCE [--pp N] [--json]`: a model's layer map.

The fast path of the workbench: it imports no torch, transformers, numpy or Qt, and
huggingface_hub only when SOURCE is a hub id.
"""

from __future__ import annotations

import argparse
import json
import sys

from bringup.core.layermap.provenance import read_by
from bringup.core.layermap.vocabulary import LayerMap

MIXER_LETTERS = {
    "attention": "*",
    "sliding_attention": "w",
    "sparse_attention": "I",  # indexer-selected keys
    "mamba2": "M",
    "mamba": "m",
    "gated_delta_net": "G",
    "kimi_delta_attention": "K",
    "lightning_attention": "L",
    "short_conv": "C",
    "attention+mamba2": "H",
    "none": "",
}
FFN_LETTERS = {"moe": "E", "mlp": "-", "none": ""}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="config.json path, model folder, catalogue name or hub id (owner/name)")
    parser.add_argument("--pp", type=int, default=1, metavar="N", help="pipeline stages to split the layers over (as SGLang does)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")


def main(args: argparse.Namespace) -> int:
    from bringup.core.sources.resolve import load_layer_map

    from bringup.core.layermap.constraints import map_problems, problem_findings

    layer_map = load_layer_map(args.source, pp=args.pp)
    problems = map_problems(layer_map)
    if args.json:
        from bringup.core.layermap.layer_schemes import quantization_json

        doc = layer_map.to_json()
        doc["quantization"] = quantization_json(layer_map)
        if problems:  # sizes the engine cannot build with (the same findings validate reports)
            doc["findings"] = [f.to_json() for f in problem_findings(problems)]
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(layer_map))
        for problem in problems:
            sys.stdout.write(f"  problem: {problem.text()}; the engine cannot build this model (fix {problem.field})\n")
    return 0


def symbol(mixer: str, ffn: str) -> str:
    return (MIXER_LETTERS.get(mixer, "?") + FFN_LETTERS.get(ffn, "?")) or "."


def _count(n: float) -> str:
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return str(int(n))


def _ids(ids: list[int], limit: int = 24) -> str:
    if len(ids) <= limit:
        return str(ids)
    return "[" + ", ".join(map(str, ids[:limit])) + f", ... {len(ids) - limit} more]"


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def render_text(m: LayerMap) -> str:
    from bringup.core.layermap.folding import fold_layers

    out = [f"{m.name}"]
    arch = " / ".join(x for x in (m.model_type, m.architecture) if x)
    out.append(f"  architecture   {arch or '?'}; hybrid family: {m.family or 'none'}")
    if m.provenance:
        out.append(f"  read by        {read_by(m.provenance)}")
    mixers: dict[str, int] = {}
    for l in m.layers:
        mixers[l.mixer] = mixers.get(l.mixer, 0) + 1
    mix = ", ".join(f"{n} {'FFN-only' if k == 'none' else k}" for k, n in sorted(mixers.items(), key=lambda kv: -kv[1]))
    out.append(f"  layers         {m.num_layers} ({mix})")
    params = f"{_count(m.params_total)} total"
    if m.params_active is not None:
        params += f", {_count(m.params_active)} active per token"
    out.append(f"  parameters     {params}")
    from bringup.core.layermap.layer_schemes import quantization_summary

    quant = quantization_summary(m)
    if quant:
        out.append(f"  weights        {quant}")
    out.append(f"  full attention {len(m.full_attention_layers)}: {_ids(m.full_attention_layers)}")
    if m.sliding_attention_layers:
        window = {l.attention.window for l in m.layers if l.mixer == "sliding_attention" and l.attention} - {None}
        extra = f" (window {', '.join(map(str, sorted(window)))})" if window else ""
        out.append(f"  sliding        {len(m.sliding_attention_layers)}: {_ids(m.sliding_attention_layers)}{extra}")
    if m.sparse_attention_layers:
        topk = {l.attention.index_topk for l in m.layers if l.mixer == "sparse_attention" and l.attention} - {None}
        extra = f" (indexer picks {', '.join(map(str, sorted(topk)))} keys per query)" if topk else ""
        out.append(f"  sparse attn    {len(m.sparse_attention_layers)}: {_ids(m.sparse_attention_layers)}{extra}")
    if m.kv_shared_layers:
        pairs = ", ".join(f"{l.index}<-{l.kv_shared_from}" for l in m.layers if l.kv_shared_from is not None)
        out.append(f"  KV shared      {len(m.kv_shared_layers)} reuse an earlier layer's KV: {pairs}")
    out.append(f"  state          {len(m.state_layers)}: {_ids(m.state_layers)}")
    out.append(f"  moe / mlp      {len(m.moe_layers)} / {len(m.mlp_layers)}")
    experts = {(l.moe.experts, l.moe.top_k) for l in m.layers if l.ffn == "moe" and l.moe}
    if experts:
        out.append("  experts        " + ", ".join(f"{e} (top-{k})" for e, k in sorted(experts, key=str)))
    kv = sum(l.kv_elems_per_token for l in m.layers) * 2
    state = sum(l.conv_state_elems * 2 + l.ssm_state_elems * 4 for l in m.layers)
    out.append(f"  KV cache       {kv:,} bytes/token (bf16, {len(m.kv_layers)} layers)")
    if m.state_layers:
        out.append(f"  state cache    {_mib(state)}/request (bf16 conv, fp32 SSM, {len(m.state_layers)} layers)")
    if m.mtp_layers:
        mtp = " ".join(symbol(l.mixer, l.ffn) for l in m.mtp_layers)
        out.append(f"  MTP blocks     {len(m.mtp_layers)} outside the stack, not counted: {mtp}")
    out.append("")
    out.append("  map (folded; " + _legend(m) + ")")
    for fold in fold_layers(m.layers):
        unit = [symbol(mx, f) for mx, f in fold.unit]
        sep = "" if all(len(s) == 1 for s in unit) else " "
        span = f"{fold.start}-{fold.stop - 1}" if fold.stop - fold.start > 1 else f"{fold.start}"
        times = f"  x{fold.times}" if fold.times > 1 else ""
        out.append(f"    {span:>9}  {sep.join(unit)}{times}")
    if m.pp_size > 1:
        out.append("")
        out.append(f"  pipeline stages ({m.pp_size}, split as SGLang's get_pp_indices)")
        for stage in range(m.pp_size):
            ls = m.layers_of_stage(stage)
            kvs = sum(1 for l in ls if l.is_kv)
            sts = sum(1 for l in ls if l.is_state)
            out.append(f"    stage {stage}: layers {ls[0].index}-{ls[-1].index} ({len(ls)}), {kvs} KV, {sts} state")
    for note in m.notes:
        out.append(f"  note: {note}")
    return "\n".join(out) + "\n"


def _legend(m: LayerMap) -> str:
    seen = []
    for l in m.layers:
        for word, letters in ((l.mixer, MIXER_LETTERS), (l.ffn, FFN_LETTERS)):
            if letters.get(word) and (letters[word], word) not in seen:
                seen.append((letters[word], word))
    return ", ".join(f"{k} {w}" for k, w in seen)
