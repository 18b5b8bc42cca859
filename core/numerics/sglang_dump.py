"""Read SGLang's per-layer tensor dumps (`--debug-tensor-dump-output-folder DIR`) as block outputs.

What SGLang writes (sglang/srt/debug_utils/tensor_dump_forward_hook.py, the same in the 0.5.5,
0.5.6, 0.5.17 and 0.5.23 wheels; 0.5.4 has the flag but no such file):
- one folder per rank, `TP{tp_rank}_PP{pp_rank}_Rank{tp_size * pp_rank + tp_rank}_pid{pid}` (:40-43);
- one `Pass{N:05d}.pt` per forward pass (:81), a dict saved with torch.save (:85);
- forward hooks only on *leaf* modules and on the top-level module `model`
  (env TENSOR_DUMP_TOP_LEVEL_MODULE_NAME, :117-124, :156); keys are module names
  (`model.layers.3.mixer.out_proj`), values the leaf's output on the CPU: a tensor, or for a tuple
  output the list of its non-None tensors (one alone: the tensor itself) (:49-57);
- the top-level hook adds `model.forward_batch_info.{input_ids,seq_lens,positions}` of the pass and
  then saves the file (:60-69, :127-134), so `model`'s own output (and the logits processor's) lands
  in the *next* pass's file; `--debug-tensor-dump-layers` keeps only the listed `model.layers.N` (:103-112).
- the server skips its warm-up and CUDA graphs while dumping (server_args.py 0.5.17 :8119-8125;
  arg_groups/serving_hook.py 0.5.23 :544-564), so Pass00000 is the first request's first forward.

So a file holds no decoder-layer outputs as such. It holds the pre-norms' outputs: SGLang's
NemotronH (models/nemotron_h.py) runs each block as `hidden, residual = norm(hidden, residual)`
(0.5.17 :398, :575, :753 via nemotron_h_utils.input_norm_maybe_fuse_allreduce :85-106; 0.5.23 via
layers/layer_boundary/residual/add_norm.py: NormQuantReadout.update_and_read :355-371 -> _norm_quant_kernel
:257-268 -> _update_and_read_residual_plain :185-190, and NormReadout :419; ROCm aiter kernels there bypass
the norm module, so such runs dump no pairs) and the final `norm_f` the same way
(0.5.17 :867; 0.5.23 residual/access.py :51). RMSNorm with a residual returns (normed, x + residual)
(layers/layernorm.py forward_native :644-661), so `model.layers.{N+1}.norm` holds
[normed, residual stream after block N] and `model.norm_f` holds [normed, the last block's output]:
the block outputs our reference captures. Llama-style models name the pre-norm `input_layernorm`
and the final norm `norm`. MoE blocks' `mixer.topk` (a leaf TopK, layers/moe/topk.py
StandardTopKOutput :363-368) holds [topk_weights, topk_ids, router_logits]: the experts each token used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from bringup.core.errors import UserError

RANK_DIR = re.compile(r"^TP(\d+)_PP(\d+)_Rank(\d+)_pid(\d+)$")
PASS_FILE = re.compile(r"^Pass(\d+)\.pt$")
TOP = "model"  # SGLang's default TENSOR_DUMP_TOP_LEVEL_MODULE_NAME
BLOCK_NORMS = ("norm", "input_layernorm")  # the first norm of a block, by family
FINAL_NORMS = ("norm_f", "norm", "final_layernorm")
BATCH_INFO = ".forward_batch_info"


def top_level(tensors: dict) -> str:
    """The top-level module's name: the prefix of its batch info (`model`, or what
    TENSOR_DUMP_TOP_LEVEL_MODULE_NAME named)."""
    for key in tensors:
        if key.endswith(f"{BATCH_INFO}.input_ids"):
            return key[: -len(f"{BATCH_INFO}.input_ids")]
    return TOP


@dataclass
class DumpPass:
    """One forward pass of an SGLang dump, as blocks: what `compare` sets beside the reference."""

    folder: Path
    files: list[Path]  # one per pipeline stage (TP rank 0 of each), in stage order
    index: int
    sequences: list[list[int]]  # the token ids of each request in the pass, in the dump's order
    blocks: dict[int, "object"] = field(default_factory=dict)  # block index -> [tokens, hidden] float32
    routing: dict[int, "object"] = field(default_factory=dict)  # MoE block -> expert ids [tokens, k]
    dtype: str = ""

    @property
    def num_tokens(self) -> int:
        return sum(len(s) for s in self.sequences)

    @property
    def name(self) -> str:
        return ", ".join(f"{f.parent.name}/{f.name}" for f in self.files)


def rank_folders(folder: Path) -> dict[tuple[int, int], Path]:
    """(tp_rank, pp_rank) -> rank folder. Eagle runs put target and draft under 'target' / 'draft'."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder; give the folder passed to SGLang's --debug-tensor-dump-output-folder")
    if (folder / "target").is_dir() and not any(RANK_DIR.match(p.name) for p in folder.iterdir()):
        folder = folder / "target"  # speculative decoding: the target model's dump (load_model_utils.py)
    found: dict[tuple[int, int], Path] = {}
    for p in sorted(folder.iterdir()):
        m = RANK_DIR.match(p.name)
        if m and p.is_dir():
            key = (int(m.group(1)), int(m.group(2)))
            # Several server runs into one folder: the newest (by its files) wins, and is said below.
            if key not in found or _newest(p) > _newest(found[key]):
                found[key] = p
    if not found:
        raise UserError(f"{folder} holds no SGLang dump (no TP*_PP*_Rank*_pid* folder): was the server started "
                        f"with --debug-tensor-dump-output-folder {folder}, and has it served a request?")
    return found


def _newest(folder: Path) -> float:
    return max((p.stat().st_mtime for p in folder.glob("Pass*.pt")), default=0.0)


def pass_files(rank_folder: Path) -> dict[int, Path]:
    return {int(m.group(1)): p for p in rank_folder.iterdir() if (m := PASS_FILE.match(p.name))}


def _tensor_list(value) -> list:
    return value if isinstance(value, list) else [value]


def batch_info(tensors: dict, where: str) -> tuple[list[int], list[int], list[int]]:
    """The pass's (input_ids, seq_lens, positions), as the top-level hook saved them."""
    info = top_level(tensors) + BATCH_INFO
    try:
        return tuple(tensors[f"{info}.{name}"].long().tolist() for name in ("input_ids", "seq_lens", "positions"))
    except KeyError as missing:
        raise UserError(f"{where} has no {missing.args[0]}: not a file SGLang's tensor dump wrote") from None


def sequences_of(tensors: dict, where: str) -> list[list[int]] | None:
    """The pass's requests as token-id lists when each is read whole from its first token (a full
    prefill); None for a decode pass or an extend that continues a cached prefix."""
    ids, seq_lens, positions = batch_info(tensors, where)
    if sum(seq_lens) != len(ids) or len(positions) != len(ids):
        return None
    out, start = [], 0
    for n in seq_lens:
        if positions[start:start + n] != list(range(n)):
            return None
        out.append(ids[start:start + n])
        start += n
    return out


def _load(path: Path) -> dict:
    import torch

    try:
        data = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # a truncated file (the server was killed mid-write), not a torch file
        raise UserError(f"{path}: cannot be read as a tensor dump ({type(err).__name__}: {err})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: holds a {type(data).__name__}, not the dict of module outputs SGLang writes")
    return data


def _residual(value):
    """The residual stream from a pre-norm's output [normed, x + residual]; None for a lone tensor
    (a norm without residual: the stack's first)."""
    parts = _tensor_list(value)
    return parts[1] if len(parts) == 2 else None


def blocks_from(tensors: dict, num_layers: int) -> dict[int, object]:
    """Block outputs from the pre-norms: block N is the residual that `layers.{N+1}`'s first norm
    (or, for the last block, the final norm) was given."""
    out, top = {}, top_level(tensors)
    for n in range(num_layers):
        if n + 1 < num_layers:
            keys = [f"{top}.layers.{n + 1}.{name}" for name in BLOCK_NORMS]
        else:
            keys = [f"{top}.{name}" for name in FINAL_NORMS]
        for key in keys:
            if key in tensors and (res := _residual(tensors[key])) is not None:
                out[n] = res
                break
    return out


def routing_from(tensors: dict, num_layers: int) -> dict[int, object]:
    out, top = {}, top_level(tensors)
    for n in range(num_layers):
        value = tensors.get(f"{top}.layers.{n}.mixer.topk", tensors.get(f"{top}.layers.{n}.mlp.topk"))
        parts = _tensor_list(value) if value is not None else []
        if len(parts) >= 2 and not parts[1].is_floating_point():  # [weights, ids, router logits]
            out[n] = parts[1].long()
    return out


def stage_passes(folder, pass_index: int | None = None) -> tuple[list[dict[int, Path]], list[int]]:
    """Each pipeline stage's pass files (TP rank 0 of each, in stage order) and the pass numbers all hold."""
    ranks = rank_folders(Path(folder))
    stages = sorted((pp, path) for (tp, pp), path in ranks.items() if tp == 0)
    if not stages:
        raise UserError(f"{folder}: no TP0 rank folder; the residual stream is read from tensor-parallel rank 0")
    per_stage = [pass_files(path) for _, path in stages]
    common = sorted(set.intersection(*(set(p) for p in per_stage)))
    if not common:
        raise UserError(f"{stages[0][1]} holds no Pass*.pt file: the server has not run a forward pass since it started "
                        "dumping; send it a request first")
    if pass_index is not None and pass_index not in common:
        raise UserError(f"--pass {pass_index}: the dump has passes {_ranges(common)}")
    return per_stage, common


def read_pass(folder, num_layers: int, pass_index: int | None = None) -> DumpPass:
    """The pass to compare: `pass_index`, or the first whose requests are full prefills. Pipeline
    stages (PP ranks) are joined; tensor-parallel ranks hold the same residual stream: TP rank 0 is read."""
    per_stage, common = stage_passes(folder, pass_index)
    candidates = [pass_index] if pass_index is not None else common
    for n in candidates:
        files = [p[n] for p in per_stage]
        tensors: dict = {}
        for f in files:
            tensors.update(_load(f))
        seqs = sequences_of(tensors, str(files[0]))
        if seqs is None:
            if pass_index is not None:
                raise UserError(
                    f"Pass{n:05d} is not a full prefill (a decode step, or an extend that continues a cached prefix): "
                    f"its tokens cannot be run alone; pick a pass whose requests start at position 0, or start "
                    "SGLang with --disable-radix-cache so every prompt is read whole")
            continue
        blocks = blocks_from(tensors, num_layers)
        if not blocks:
            raise UserError(f"{files[0]}: no block outputs found (no {top_level(tensors)}.layers.N.norm / input_layernorm "
                            "pair and no final norm): is this a model whose decoder SGLang names model.layers?")
        dtype = str(next(iter(blocks.values())).dtype).removeprefix("torch.")
        return DumpPass(Path(folder), files, n, seqs, {i: t.float() for i, t in blocks.items()},
                        routing_from(tensors, num_layers), dtype)
    raise UserError(f"none of the dump's passes ({_ranges(common)}) is a full prefill: send the server a new prompt "
                    "(with --disable-radix-cache every prompt is read whole)")


def _ranges(values: list[int]) -> str:
    return f"{values[0]}..{values[-1]}" if len(values) > 1 else str(values[0])


@dataclass
class DumpStep:
    """One forward pass of a single request: its prefill, or one of its decode steps."""

    index: int  # the pass number
    kind: str  # "prefill" or "decode"
    input_ids: list[int]
    positions: list[int]
    blocks: dict[int, "object"]  # block -> [tokens, hidden] in the dump's dtype
    routing: dict[int, "object"]  # MoE block -> expert ids [tokens, k]


def request_steps(folder, num_layers: int, first: int | None = None):
    """The passes of one request, in order, read one file at a time (a real model's prefill pass is
    gigabytes): the first pass that is a full prefill of a single request (or `first`), then each
    following pass that decodes that request alone, one token at a position one past the last.
    The steps end where another request joins the batch or the dump ends."""
    per_stage, common = stage_passes(folder, first)
    length = None
    for n in common if first is None else [p for p in common if p >= first]:
        tensors: dict = {}
        for f in (p[n] for p in per_stage):
            tensors.update(_load(f))
        ids, seq_lens, positions = batch_info(tensors, str(per_stage[0][n]))
        if length is None:
            if len(seq_lens) != 1 or positions != list(range(len(ids))) or seq_lens[0] != len(ids):
                if first is not None:
                    raise UserError(f"Pass{n:05d} is not the full prefill of one request (it holds {len(seq_lens)} "
                                    "request(s)); send one prompt at a time, with --disable-radix-cache")
                continue
            kind = "prefill"
        elif len(seq_lens) == 1 and len(ids) == 1 and positions == [length] and seq_lens[0] == length + 1:
            kind = "decode"
        else:
            return  # another request, or a new prompt: this request's steps end here
        length = seq_lens[0]
        blocks = blocks_from(tensors, num_layers)
        if not blocks:
            raise UserError(f"{per_stage[0][n]}: no block outputs found (no {top_level(tensors)}.layers.N.norm / "
                            "input_layernorm pair and no final norm): is this a model whose decoder SGLang names "
                            "model.layers?")
        yield DumpStep(n, kind, ids, positions, blocks, routing_from(tensors, num_layers))
        del tensors, blocks
    if length is None:
        raise UserError(f"none of the dump's passes ({_ranges(common)}) is the full prefill of a single request: send "
                        "the server one prompt at a time (with --disable-radix-cache every prompt is read whole)")
