"""`bringup compare SOURCE --sglang-dump DIR`: an SGLang run's per-layer dump against our reference.

The dump (sglang_dump.py) gives each block's output for one forward pass and the token ids it read;
the reference (the engine's plain kernels, float32, CPU) reads the same ids, one request at a time,
following the dump's expert choices at MoE blocks, so both sides see the same tokens and experts.
SOURCE must be the checkpoint SGLang served (the same weights): a dump of `--load-format dummy`
random weights cannot be compared.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bringup.core.errors import UserError

from .compare import (REFERENCE_ENV, TOLERANCES, CompareResult, block_errors, capture_args, finish,
                      reference_name, run_capture)
from .sglang_dump import read_pass


def _layer_count(source) -> int:
    from bringup.core.sources.resolve import load_layer_map

    return len(load_layer_map(source or "default").layers)


def run_sglang_compare(source, dump_dir, *, pass_index: int | None = None, reference_device="cpu",
                       tolerance=None, own_routing: bool = False, timeout: float = 600) -> CompareResult:
    import torch

    dump = read_pass(dump_dir, _layer_count(source), pass_index)
    with tempfile.TemporaryDirectory(prefix="bringup-sglang-compare-") as tmp:
        ids_file, routing_file, ref_out = Path(tmp) / "ids.json", Path(tmp) / "routing.pt", Path(tmp) / "reference.pt"
        ids_file.write_text(json.dumps(dump.sequences))
        follow = None
        if dump.routing and not own_routing:
            torch.save({"routing": dump.routing}, routing_file)
            follow = routing_file
        reference_run = run_capture("reference", capture_args(source, reference_device, "float32", ref_out,
                                                              input_ids=ids_file, follow_routing=follow),
                                    ref_out, env=REFERENCE_ENV, timeout=timeout)
    for index, block in dump.blocks.items():
        want = tuple(reference_run["blocks"][index].shape)
        if tuple(block.shape) != want:
            raise UserError(f"{dump.name}: block {index} holds {tuple(block.shape)} where {source or 'default'} gives "
                            f"{want} for the same tokens: is this the model SGLang served?")
    if own_routing and dump.routing:
        from .routing import flipped_tokens

        reference_run["routing_flips"] = {i: flipped_tokens(ids, reference_run["routing"][i])
                                          for i, ids in dump.routing.items() if i in reference_run["routing"]}
    tol = tolerance if tolerance is not None else TOLERANCES.get(dump.dtype, 1e-2)
    result = CompareResult(tol, block_errors(dump.blocks, reference_run), device=f"SGLang dump pass {dump.index}",
                           dtype=dump.dtype, reference_implementations=reference_run["implementations"],
                           num_tokens=dump.num_tokens, reference=reference_name(reference_device),
                           routing_followed=follow is not None, source_file=dump.name)
    return finish(result)
