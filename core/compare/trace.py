"""The child of a layer-level A/B: one request through our engine, step by step, keeping each
block's output and each recurrent layer's state after every step.

    python -m bringup.core.compare.trace SOURCE --device D --dtype T --prompt-ids FILE.json --steps N
        --out FILE.pt [--follow FILE.pt] [--own-routing] [--fault SPEC] [--load-format dummy]
        [--full STEP:BLOCK,...]

Step 0 is the prefill of the prompt, steps 1..N decode one token each. The kernels are the engine's
choice (BRINGUP_KERNELS in the environment picks them: the parent sets it per side). With
`--follow A.pt` this run reads the tokens run A chose (so both see the same text at every step,
whatever this run would have sampled) and uses A's MoE experts, counting per step the tokens whose
own choice differed (routing flips); `--own-routing` lets it choose its own experts.
Each block output and state is kept as a digest (digest.py: exact checksums and a small sketch, the
tensor itself only when small), so a real-size model's trace stays megabytes; `--full STEP:BLOCK`
keeps that block's output (and its layer's states) at that step whole, to look into.
Progress goes to stderr as `trace: ...` lines (the stage, seconds since the start), which the parent
shows as they come and names when the child runs past its time; SIGUSR1 makes the child write its
threads' stacks to stderr (the parent sends it before ending a stalled child), and with
BRINGUP_TRACE_STACKS=S it writes them by itself whenever S seconds pass without a new stage.
Saved: {"steps": [{"kind", "tokens", "sampled", "own_sample", "blocks": {i: Digest}, "conv": {i: Digest},
"ssm": {i: Digest}, "flips": {i: n}, "routing": {i: ids}}], "layers", "implementations", "dtype", "device", "fault"}.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import time
from pathlib import Path

from bringup.core.numerics.children import can_ask_for_stacks

from .digest import KEEP_BELOW, digest
from .faults import Fault, parse_fault, shift_conv_state
from .step_logprobs import token_logprobs

PROGRESS = "trace: "  # the prefix of the child's progress lines on stderr
STACKS_ENV = "BRINGUP_TRACE_STACKS"  # seconds without a new stage after which the stacks are written


def trace(source, *, device: str, dtype: str, prompt_ids: list[int], steps: int, follow: dict | None = None,
          own_routing: bool = False, fault: Fault | None = None, load_format: str | None = None, log=None,
          keep_full: frozenset = frozenset(), keep_below: int = KEEP_BELOW, progress=None) -> dict:
    progress = progress or (lambda message: None)
    import torch

    from bringup.core.engine.sampling import SamplingParams
    from bringup.core.errors import UserError
    from bringup.core.numerics.capture import eager_engine
    from bringup.core.numerics.routing import RoutingRecorder

    progress(f"building the engine on {device} ({dtype}, kernels {os.environ.get('BRINGUP_KERNELS', 'auto')})")
    engine = eager_engine(source, device=device, dtype=dtype, load_format=load_format, log=log)
    progress("engine ready")
    model = engine.model
    count = len(engine.layer_map.layers)
    pool = engine.state_pool
    if fault is not None and not 0 <= fault.layer < count:
        raise UserError(f"fault {fault}: block {fault.layer} is not a block of this model (0..{count - 1})")
    if fault is not None and fault.kind == "state" and fault.layer not in pool.layer_ids:
        raise UserError(f"fault {fault}: block {fault.layer} keeps no recurrent state "
                        f"(the state layers are {list(pool.layer_ids)})")
    vocab = model.input_embedding.num_embeddings
    if not prompt_ids or any(not 0 <= t < vocab for t in prompt_ids):
        raise UserError(f"the prompt must be token ids of this model's vocabulary (0..{vocab - 1})")
    forced_tokens = list(follow["sampled"]) if follow else None
    forced_routing = {} if (follow is None or own_routing) else {int(k): v for k, v in follow["routing"].items()}
    records: list[dict] = []
    current: dict = {"blocks": {}}

    def hook(layer, hidden):
        if fault is not None and fault.kind == "scale" and layer.index == fault.layer:
            hidden = hidden * fault.factor
        whole = (len(records), layer.index) in keep_full
        current["blocks"][layer.index] = digest(hidden, per_row=True, keep_full=whole, keep_below=keep_below)
        return hidden

    def state(kind, lid, slot):
        tensor = (pool.conv if kind == "conv" else pool.ssm)(lid)[slot]
        return digest(tensor, keep_full=(len(records), lid) in keep_full, keep_below=keep_below)

    original_run, original_forward = engine.runner.run, engine.runner.forward
    logits_seen: list = []

    def forward(step):
        logits = original_forward(step)
        logits_seen.append(logits)
        return logits

    def run(step):
        req = step.requests[0]
        kind = "prefill" if req.num_computed < len(req.prompt_ids) else "decode"
        flips_before = dict(recorder.flips)
        routing_before = {k: len(v) for k, v in recorder.routing.items()}
        index = len(records)
        first = " (the first step on a GPU compiles its kernels)" if index == 0 and engine.device.type != "cpu" else ""
        progress(f"step {index} ({kind}, {step.num_tokens} tokens) running{first}")
        tokens = original_run(step)
        slot = req.state_slot
        if fault is not None and fault.kind == "state":
            shift_conv_state(pool.conv(fault.layer), slot)
        own = tokens[0]
        if forced_tokens is not None and own is not None:
            if index >= len(forced_tokens):
                raise UserError("run A took fewer steps than this run; they cannot be compared step by step")
            if forced_tokens[index] is not None:  # a dump's last pass: nothing read after it, our own pick stands
                tokens = [forced_tokens[index]]
        read = logits_seen.pop() if logits_seen else None
        logits_seen.clear()
        records.append({
            "kind": kind, "tokens": step.num_tokens, "sampled": tokens[0], "own_sample": own,
            "logprobs": None if own is None or read is None else token_logprobs(read[-1], tokens[0]),
            "blocks": current["blocks"],
            "conv": {lid: state("conv", lid, slot) for lid in pool.layer_ids},
            "ssm": {lid: state("ssm", lid, slot) for lid in pool.layer_ids},
            "flips": {k: v - flips_before.get(k, 0) for k, v in recorder.flips.items() if v - flips_before.get(k, 0)},
            "routing": {k: torch.cat(v[routing_before.get(k, 0):]) for k, v in recorder.routing.items()
                        if len(v) > routing_before.get(k, 0)},
        })
        current["blocks"] = {}
        progress(f"step {index} done")
        return tokens

    model.block_hook = hook
    engine.runner.run, engine.runner.forward = run, forward
    params = SamplingParams(max_new_tokens=steps + 1, temperature=0.0, ignore_eos=True)
    try:
        with torch.inference_mode(), RoutingRecorder(model, forced_routing) as recorder:
            engine.generate([list(prompt_ids)], params)
    finally:
        model.block_hook = None
        engine.runner.run, engine.runner.forward = original_run, original_forward
    seen = sum(r["own_sample"] is not None for r in records)  # a prompt chunk mid-way samples nothing
    if seen != steps + 1:  # the engine stepped past runner.run (overlapped steps, graphs)
        raise UserError(f"the trace saw {seen} of the {steps + 1} sampling steps the engine ran: its steps did not "
                        "go through ModelRunner.run, where the trace reads them")
    if recorder.unforceable:
        raise UserError(f"the router op(s) {', '.join(sorted(recorder.unforceable))} cannot follow another run's "
                        "routing; run with --own-routing")
    return {
        "steps": records,
        "sampled": [r["sampled"] for r in records],
        "routing": recorder.result(),
        "layers": [(l.index, l.mixer, l.ffn) for l in engine.layer_map.layers],
        "state_layers": list(pool.layer_ids),
        "implementations": dict(model.ops.implementations),
        "dtype": str(engine.dtype).removeprefix("torch."),
        "device": str(engine.device),
        "kernels": os.environ.get("BRINGUP_KERNELS", "auto"),
        "fault": str(fault) if fault else None,
    }


def parse_places(text: str) -> frozenset:
    """`STEP:BLOCK,...` -> {(step, block)}."""
    from bringup.core.errors import UserError

    places = set()
    for item in filter(None, (p.strip() for p in text.split(","))):
        step, sep, block = item.partition(":")
        if not (sep and step.isdigit() and block.isdigit()):
            raise UserError(f"--full {item!r}: give STEP:BLOCK (e.g. 0:3 for block 3 in the prefill)")
        places.add((int(step), int(block)))
    return frozenset(places)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bringup.core.compare.trace")
    parser.add_argument("source")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--prompt-ids", required=True, help="a JSON file: one list of token ids")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--follow", default=None)
    parser.add_argument("--own-routing", action="store_true")
    parser.add_argument("--fault", default=None)
    parser.add_argument("--load-format", default=None)
    parser.add_argument("--full", default="", help="STEP:BLOCK,... kept whole")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    progress = Progress(os.environ.get(STACKS_ENV))
    progress(f"reading the prompt ids from {args.prompt_ids}")
    try:
        prompt = json.loads(Path(args.prompt_ids).read_text())
    except (OSError, ValueError) as err:
        print(f"error: --prompt-ids {args.prompt_ids}: not a JSON list of token ids ({err})", file=sys.stderr)
        return 2
    progress("importing torch")
    import torch

    from bringup.core.errors import UserError

    try:
        follow = torch.load(args.follow, weights_only=False) if args.follow else None
        result = trace(args.source, device=args.device, dtype=args.dtype, prompt_ids=prompt, steps=args.steps,
                       follow=follow, own_routing=args.own_routing, fault=parse_fault(args.fault),
                       load_format=args.load_format, keep_full=parse_places(args.full), progress=progress)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    progress(f"saving {args.out}")
    partial = args.out + ".partial"
    torch.save(result, partial)
    os.replace(partial, args.out)
    progress.stop()
    return 0


class Progress:
    """The child's `trace: STAGE (T s)` lines on stderr; SIGUSR1 writes every thread's stack, and
    with `stall_seconds` they are written whenever that long passes without a new stage."""

    def __init__(self, stall_seconds: str | None = None):
        self.start = time.monotonic()
        self.stall = _seconds(stall_seconds)
        if can_ask_for_stacks():  # POSIX only; without SIGUSR1 a stall is named by its stage lines
            faulthandler.register(signal.SIGUSR1, all_threads=True)

    def __call__(self, stage: str) -> None:
        print(f"{PROGRESS}{stage} ({time.monotonic() - self.start:.1f} s)", file=sys.stderr, flush=True)
        if self.stall:
            faulthandler.dump_traceback_later(self.stall, repeat=True)  # re-armed: counts from this stage

    def stop(self) -> None:
        faulthandler.cancel_dump_traceback_later()


def _seconds(text: str | None) -> float | None:
    try:
        value = float(text) if text else None
    except ValueError:
        print(f"{PROGRESS}{STACKS_ENV}={text!r} is not a number of seconds; no stacks on a stall", file=sys.stderr)
        return None
    return value if value and value > 0 else None


if __name__ == "__main__":
    sys.exit(main())
