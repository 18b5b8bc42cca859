"""Another engine's per-layer tensor dump as a layer-level trace (the shape trace.py saves), so the
A/B's divergence view reads it as it reads our engine's runs: `bringup ab --layers SOURCE --a
dump=DIR --b kernels=reference` runs our engine on the dump's own tokens and experts and shows the
first block and step where they part.

SGLang (`--debug-tensor-dump-output-folder DIR`, 0.5.5 on): core/numerics/sglang_dump.py reads one
request's passes, the prefill and then each decode step, and maps the dumped module names onto our
map's blocks (block N's output is the residual that `model.layers.{N+1}.norm` was given). The dump
holds module outputs only: the Mamba layers' conv and SSM states live in SGLang's pools, not in any
module output, so a dump's trace compares block outputs, never states.

vLLM: no release has a per-layer tensor dump (core/rules/vllm_facts.py TENSOR_DUMP), so a vLLM run
has none to read; the message says so.
"""

from __future__ import annotations

from pathlib import Path

from bringup.core.errors import UserError

from .digest import KEEP_BELOW, digest


def _is_sglang_dump(folder: Path) -> bool:
    from bringup.core.numerics.sglang_dump import RANK_DIR

    inside = folder / "target" if (folder / "target").is_dir() else folder
    return inside.is_dir() and any(RANK_DIR.match(p.name) for p in inside.iterdir())


def dump_trace(folder, source, *, steps: int | None = None, keep_full: frozenset = frozenset(),
               keep_below: int = KEEP_BELOW) -> dict:
    """The trace of the first single request in an SGLang dump: at most `steps` decode steps."""
    from bringup.core.numerics.sglang_dump import request_steps
    from bringup.core.sources.resolve import load_layer_map

    from bringup.core.rules.vllm_facts import TENSOR_DUMP

    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"dump={folder}: no such folder; give the folder the server dumped into "
                        "(SGLang: --debug-tensor-dump-output-folder)")
    if not _is_sglang_dump(folder):
        raise UserError(f"dump={folder} holds no SGLang dump (TP*_PP*_Rank*_pid*/Pass*.pt). SGLang writes one with "
                        f"--debug-tensor-dump-output-folder (0.5.5 on); vLLM has no tensor dump ({TENSOR_DUMP.source})")
    layer_map = load_layer_map(source or "default")
    layers = [(l.index, l.mixer, l.ffn) for l in layer_map.layers]
    records, dtype, routing = [], None, {}
    for step in request_steps(folder, len(layers)):
        if steps is not None and len(records) > steps:
            break
        if dtype is None:
            dtype = str(next(iter(step.blocks.values())).dtype).removeprefix("torch.")
        if records:  # the token this pass reads is the one the previous step chose
            records[-1]["sampled"] = records[-1]["own_sample"] = step.input_ids[0]
        s = len(records)
        records.append({
            "kind": step.kind, "tokens": len(step.input_ids), "sampled": None, "own_sample": None,
            "input_ids": step.input_ids, "pass": step.index,
            "blocks": {i: digest(t, per_row=True, keep_full=(s, i) in keep_full, keep_below=keep_below)
                       for i, t in sorted(step.blocks.items())},
            "conv": {}, "ssm": {}, "flips": {},
            "routing": {i: ids for i, ids in step.routing.items()},
        })
        for i, ids in step.routing.items():
            routing.setdefault(i, []).append(ids)
    import torch

    missing = [i for i, *_ in layers if i not in records[0]["blocks"]]
    return {
        "steps": records,
        "prompt_ids": records[0]["input_ids"],
        "sampled": [r["sampled"] for r in records],
        "routing": {i: torch.cat(parts) for i, parts in routing.items()},
        "layers": layers,
        "state_layers": [],
        "implementations": {},
        "dtype": dtype or "bfloat16",
        "device": f"SGLang dump {folder.name} (passes {records[0]['pass']}..{records[-1]['pass']})",
        "kernels": "SGLang",
        "fault": None,
        "missing_blocks": missing,  # --debug-tensor-dump-layers left them out
    }
