"""The child of `bringup compare`: run one prompt through the engine and save each block's output.

    python -m bringup.core.numerics.capture SOURCE --device D --dtype T --prompt TEXT --out FILE.pt
        [--perturb-layer N]

The kernels are chosen as the engine chooses them (BRINGUP_KERNELS=reference in the environment
forces the plain references: the parent sets it for the reference run). Each block's output over
the prompt's tokens (the prefill forward) is saved in float32 on the CPU, with what ran:
{"blocks": {index: tensor}, "layers": [(index, mixer, ffn)], "implementations", "dtype", "device"}.
`--perturb-layer N` adds a known fault at block N: noise of 10% of the block output's RMS, from a
fixed seed, so that the comparison has something to find.
"""

from __future__ import annotations

import argparse
import os
import sys

PERTURB_SCALE = 0.1  # the injected fault, relative to the block output's RMS


def perturb(hidden, scale: float = PERTURB_SCALE):
    import torch

    gen = torch.Generator(device="cpu").manual_seed(1234)
    noise = torch.randn(hidden.shape, generator=gen, dtype=torch.float32).to(hidden.device, hidden.dtype)
    rms = hidden.float().pow(2).mean().sqrt()
    return hidden + noise * (rms * scale).to(hidden.dtype)


def capture(source, *, device, dtype, prompt: str, perturb_layer: int | None = None, log=None) -> dict:
    import torch

    from bringup.core.engine.default_model import resolve_default
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.sampling import SamplingParams
    from bringup.core.errors import UserError

    source = resolve_default(source) or source  # `default`: the bundled checkpoint, generated once
    engine = Engine(source, device=device, dtype=dtype, max_running_requests=1, max_total_tokens=4096,
                    log=log or (lambda m: print(m, file=sys.stderr, flush=True)))
    model = engine.model
    if not hasattr(model, "block_hook"):
        raise UserError(f"the engine's {type(model).__name__} does not report its blocks' outputs; compare needs "
                        "a model assembled from the layer map (core/engine/models/stack.py)")
    count = len(engine.layer_map.layers)
    if perturb_layer is not None and not 0 <= perturb_layer < count:
        raise UserError(f"--perturb-layer {perturb_layer} is not a block of this model (it has blocks 0..{count - 1})")
    ids = engine.tokenizer.encode(prompt)
    if not ids:
        raise UserError("the prompt has no tokens; give --prompt some text")
    blocks: dict[int, torch.Tensor] = {}

    def hook(layer, hidden):
        if layer.index in blocks:  # decode steps after the prefill: not compared
            return hidden
        if layer.index == perturb_layer:
            hidden = perturb(hidden)
        blocks[layer.index] = hidden.detach().float().cpu()
        return hidden

    model.block_hook = hook
    try:
        with torch.inference_mode():
            engine.generate([ids], SamplingParams(max_new_tokens=1, temperature=0.0))
    finally:
        model.block_hook = None
    return {
        "blocks": blocks,
        "layers": [(l.index, l.mixer, l.ffn) for l in engine.layer_map.layers],
        "implementations": dict(model.ops.implementations),
        "dtype": str(engine.dtype).removeprefix("torch."),
        "device": str(engine.device),
        "num_tokens": len(ids),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bringup.core.numerics.capture")
    parser.add_argument("source")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--perturb-layer", type=int, default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import torch

    from bringup.core.errors import UserError

    try:
        result = capture(args.source, device=args.device, dtype=args.dtype, prompt=args.prompt,
                         perturb_layer=args.perturb_layer)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    partial = args.out + ".partial"  # never a half-written file under the final name
    torch.save(result, partial)
    os.replace(partial, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
