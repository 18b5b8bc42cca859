"""The child of `bringup compare`: run one prompt through the engine and save each block's output.

    python -m bringup.core.numerics.capture SOURCE --device D --dtype T (--prompt TEXT | --input-ids FILE.json)
        --out FILE.pt [--perturb-layer N] [--follow-routing FILE.pt]

The kernels are chosen as the engine chooses them (BRINGUP_KERNELS=reference in the environment
forces the plain references: the parent sets it for the reference run). Each block's output over
the prompt's tokens (the prefill forwards) is saved in float32 on the CPU, with what ran:
{"blocks": {index: tensor}, "embedding", "layers": [(index, mixer, ffn)], "routing": {index: expert ids},
"routing_flips", "implementations", "dtype", "weights" (the scheme's label), "products_dtype" (a GGUF
model's: the least precise arithmetic of its quantized products, else None), "device", "num_tokens",
"sequences"}.
`--input-ids` gives token ids instead of text: a JSON list of sequences, each run as its own request,
one after the other, their tokens concatenated in order (how SGLang's dump lays out a batch).
`--follow-routing FILE` (a .pt holding {"routing": {block: ids}}) makes every MoE block use those
experts, counting the tokens whose own choice differed (routing.py).
`--perturb-layer N` adds a known fault at block N: noise of 10% of the block output's RMS, from a
fixed seed, so that the comparison has something to find.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .routing import RoutingRecorder

PERTURB_SCALE = 0.1  # the injected fault, relative to the block output's RMS


def perturb(hidden, scale: float = PERTURB_SCALE):
    import torch

    gen = torch.Generator(device="cpu").manual_seed(1234)
    noise = torch.randn(hidden.shape, generator=gen, dtype=torch.float32).to(hidden.device, hidden.dtype)
    rms = hidden.float().pow(2).mean().sqrt()
    return hidden + noise * (rms * scale).to(hidden.dtype)


def eager_engine(source, *, device, dtype, load_format: str | None = None, log=None):
    """One request's engine whose every forward reports its blocks (model.block_hook): no decode
    graphs nor CPU compile, which would run the decode steps past the hook (and cost seconds); no
    start-up warm-up (on a GPU its 39 steps of every size compile kernels this one request never
    runs, tens of seconds cold, in silence); no overlapped steps (CUDA's default: they
    call runner.launch, not runner.run, so the A/B trace saw no step at all and read A's tokens
    nowhere)."""
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.errors import UserError
    from bringup.core.sources.default_model import resolve_default

    source = resolve_default(source) or source  # `default`: the bundled checkpoint, generated once
    extra = {"load_format": load_format} if load_format else {}
    config = EngineConfig(source, device=device, dtype=dtype, max_running_requests=1, max_total_tokens=4096,
                          cuda_graphs=False, cpu_compile=False, warmup=False, overlap=False,
                          **extra)
    engine = Engine(config, log=log or (lambda m: print(m, file=sys.stderr, flush=True)))
    if not hasattr(engine.model, "block_hook"):
        raise UserError(f"the engine's {type(engine.model).__name__} does not report its blocks' outputs; compare "
                        "needs a model assembled from the layer map (core/engine/models/stack.py)")
    return engine


def capture(source, *, device, dtype, prompt: str | None = None, sequences: list[list[int]] | None = None,
            perturb_layer: int | None = None, follow_routing: dict | None = None, load_format: str | None = None,
            log=None) -> dict:
    import torch

    from bringup.core.engine.sampling import SamplingParams
    from bringup.core.errors import UserError

    engine = eager_engine(source, device=device, dtype=dtype, load_format=load_format, log=log)
    model = engine.model
    count = len(engine.layer_map.layers)
    if perturb_layer is not None and not 0 <= perturb_layer < count:
        raise UserError(f"--perturb-layer {perturb_layer} is not a block of this model (it has blocks 0..{count - 1})")
    if sequences is None:
        sequences = [engine.tokenizer.encode(prompt or "")]
    if not sequences or not all(sequences):
        raise UserError("the prompt has no tokens; give --prompt some text")
    vocab = model.input_embedding.num_embeddings
    if any(not 0 <= t < vocab for seq in sequences for t in seq):
        raise UserError(f"a token id is outside this model's vocabulary (0..{vocab - 1}): "
                        "were the ids made for another model?")
    # Each prefill forward adds its tokens (max_new_tokens=1: no decode step follows).
    blocks: dict[int, list[torch.Tensor]] = {}
    embedding: list[torch.Tensor] = []

    def hook(layer, hidden):
        if layer.index == perturb_layer:
            hidden = perturb(hidden)
        blocks.setdefault(layer.index, []).append(hidden.detach().float().cpu())
        return hidden

    forced = {int(k): v for k, v in (follow_routing or {}).items()}
    model.block_hook = hook
    handle = model.input_embedding.register_forward_hook(lambda _m, _a, out: embedding.append(out.detach().float().cpu()))
    try:
        with torch.inference_mode(), RoutingRecorder(model, forced) as routing:
            for seq in sequences:  # one request at a time: each is one prefill of its own
                engine.generate([list(seq)], SamplingParams(max_new_tokens=1, temperature=0.0))
    finally:
        model.block_hook = None
        handle.remove()
    if routing.unforceable:
        raise UserError(f"the router op(s) {', '.join(sorted(routing.unforceable))} cannot be made to follow "
                        "another run's routing; run compare with --own-routing")
    from bringup.core.engine.engine import weight_scheme

    from bringup.core.engine.gguf_weights import products_dtype

    return {
        "blocks": {i: torch.cat(parts) for i, parts in blocks.items()},
        "embedding": torch.cat(embedding) if embedding else None,
        "routing": routing.result(),
        "routing_details": routing.details(),
        "routing_flips": dict(routing.flips) if forced else None,
        "sequences": [len(s) for s in sequences],
        "layers": [(l.index, l.mixer, l.ffn) for l in engine.layer_map.layers],
        "implementations": dict(model.ops.implementations),
        "dtype": str(engine.dtype).removeprefix("torch."),
        "weights": weight_scheme(model).label,
        "products_dtype": products_dtype(model),  # a GGUF model's blocks: bf16 inside its products
        "device": str(engine.device),
        "num_tokens": sum(len(s) for s in sequences),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bringup.core.numerics.capture")
    parser.add_argument("source")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--prompt")
    what.add_argument("--input-ids", help="a JSON file: a list of token-id sequences")
    parser.add_argument("--perturb-layer", type=int, default=None)
    parser.add_argument("--follow-routing", default=None, help="a .pt file holding {'routing': {block: ids}}")
    parser.add_argument("--load-format", default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import torch

    from bringup.core.errors import UserError

    try:
        sequences = json.loads(Path(args.input_ids).read_text()) if args.input_ids else None
        follow = torch.load(args.follow_routing, weights_only=False)["routing"] if args.follow_routing else None
        result = capture(args.source, device=args.device, dtype=args.dtype, prompt=args.prompt, sequences=sequences,
                         perturb_layer=args.perturb_layer, follow_routing=follow, load_format=args.load_format)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    partial = args.out + ".partial"  # never a half-written file under the final name
    torch.save(result, partial)
    os.replace(partial, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
