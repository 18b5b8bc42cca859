"""Write a dump folder as SGLang's `--debug-tensor-dump-output-folder` does, from our engine's outputs.

The layout and keys follow sglang/srt/debug_utils/tensor_dump_forward_hook.py (0.5.17 / 0.5.23) and
the NemotronH module tree of sglang/srt/models/nemotron_h.py (see core/numerics/sglang_dump.py):
- `TP{tp}_PP{pp}_Rank{tp_size*pp+tp}_pid{pid}/Pass{N:05d}.pt`, a dict of leaf outputs on the CPU;
- `model.embed_tokens`; per block `model.layers.N.norm` (block 0: the normed embedding alone; later
  blocks [normed, residual] as RMSNorm(x, residual) returns); the mixer's output leaf (Mamba2
  `mixer.out_proj`, attention `mixer.o_proj`, MLP `mixer.down_proj`, MoE `mixer.experts` and
  `mixer.topk` = [topk_weights, topk_ids int32, router_logits]); `model.norm_f` = [normed, residual];
- `model.forward_batch_info.{input_ids,seq_lens,positions}`, and, from the second pass on, `model`:
  the previous pass's final hidden states (the top-level hook saves the file before adding its output).
Values come from a real run of our engine (`capture`), in the run's dtype: the writer only lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

LEAF = {"mamba2": "mixer.out_proj", "attention": "mixer.o_proj", "mlp": "mixer.down_proj", "moe": "mixer.experts"}


@dataclass
class PassSpec:
    run: dict  # a capture() result over `sequences`
    sequences: list[list[int]]
    cached: int = 0  # tokens of each request already in the prefix cache (an extend, not a full prefill)
    layers: tuple[int, ...] | None = None  # --debug-tensor-dump-layers


def _norm_weights(checkpoint: Path) -> tuple[dict[int, torch.Tensor], torch.Tensor, float]:
    import json

    from safetensors.torch import load_file

    weights = {}
    for f in sorted(checkpoint.glob("*.safetensors")):
        weights.update(load_file(f))
    eps = json.loads((checkpoint / "config.json").read_text()).get("layer_norm_epsilon", 1e-5)
    per_layer = {int(k.split(".")[2]): v for k, v in weights.items()
                 if k.startswith("backbone.layers.") and k.endswith(".norm.weight")}
    return per_layer, weights["backbone.norm_f.weight"], eps


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float, dtype) -> torch.Tensor:
    x = x.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(dtype)


def _rows(run: dict, sequences, cached: int) -> torch.Tensor:
    """The token rows of an extend that skips the first `cached` tokens of each request."""
    keep, start = [], 0
    for seq in sequences:
        keep += list(range(start + cached, start + len(seq)))
        start += len(seq)
    return torch.tensor(keep)


def pass_tensors(spec: PassSpec, checkpoint: Path, dtype=torch.bfloat16, previous_final=None) -> dict:
    norms, final_w, eps = _norm_weights(checkpoint)
    run, rows = spec.run, _rows(spec.run, spec.sequences, spec.cached)
    layers = run["layers"]
    hooked = set(spec.layers) if spec.layers is not None else {i for i, *_ in layers}
    block = {i: run["blocks"][i][rows].to(dtype) for i, *_ in layers}
    emb = run["embedding"][rows].to(dtype)
    out = {"model.embed_tokens": emb}
    for index, mixer, ffn in layers:
        if index not in hooked:
            continue
        before = emb if index == 0 else block[index - 1]
        normed = _rms(before, norms[index], eps, dtype)
        out[f"model.layers.{index}.norm"] = normed if index == 0 else [normed, before]
        kind = mixer if mixer != "none" else ffn
        out[f"model.layers.{index}.{LEAF[kind]}"] = (block[index].float() - before.float()).to(dtype)
        if ffn == "moe":
            weights, logits = run["routing_details"][index]
            out[f"model.layers.{index}.mixer.topk"] = [weights[rows], run["routing"][index][rows].to(torch.int32),
                                                        logits[rows]]
    last = layers[-1][0]
    out["model.norm_f"] = [_rms(block[last], final_w, eps, dtype), block[last]]
    ids = torch.tensor([t for seq in spec.sequences for t in seq[spec.cached:]], dtype=torch.int64)
    out["model.forward_batch_info.input_ids"] = ids
    out["model.forward_batch_info.seq_lens"] = torch.tensor([len(s) for s in spec.sequences], dtype=torch.int64)
    out["model.forward_batch_info.positions"] = torch.cat(
        [torch.arange(spec.cached, len(s), dtype=torch.int64) for s in spec.sequences])
    if previous_final is not None:
        out["model"] = previous_final
    return out


def write_sglang_dump(folder: Path, passes: list[PassSpec], checkpoint: Path, *, tp_rank=0, pp_rank=0, tp_size=1,
                      pid=31337, dtype=torch.bfloat16) -> Path:
    rank = folder / f"TP{tp_rank}_PP{pp_rank}_Rank{tp_size * pp_rank + tp_rank}_pid{pid}"
    rank.mkdir(parents=True, exist_ok=True)
    previous = None
    for n, spec in enumerate(passes):
        tensors = pass_tensors(spec, checkpoint, dtype, previous)
        torch.save(tensors, rank / f"Pass{n:05d}.pt")
        previous = tensors["model.norm_f"][0]
    return rank
