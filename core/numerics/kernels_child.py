"""The child of `bringup check-kernels`: record the kernel calls of one prompt and one decode step,
then replay each against the reference; one JSON line per kernel on stdout, as each finishes.

    python -m bringup.core.numerics.kernels_child SOURCE --device D [--dtype T] [--skip OP,OP]

Before each kernel it prints "start OP" on stderr, so that the parent can name the kernel that
crashed or hung the process (and start a fresh child that skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

PROMPT = "Check every kernel at this model's shapes."
# Names one op whose check kills the child with SIGSEGV: how tests (and users) see a crash become a finding.
CRASH_ENV = "BRINGUP_KERNEL_CHECK_CRASH"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bringup.core.numerics.kernels_child")
    parser.add_argument("source")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--skip", default="")
    parser.add_argument("--load-format", default="auto")
    args = parser.parse_args(argv)
    import torch

    from bringup.core.engine.default_model import resolve_default
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.sampling import SamplingParams
    from bringup.core.errors import UserError
    from bringup.kernels.reference import OPS as REFERENCE_OPS

    from .kernel_calls import record_calls, replay

    skip = {s for s in args.skip.split(",") if s}
    try:
        source = resolve_default(args.source) or args.source
        # Small pools: the check needs one short request (on the CPU the shapes are capped by the prompt).
        engine = Engine(source, device=args.device, dtype=args.dtype, max_running_requests=1, max_total_tokens=256,
                        cuda_graphs=False, load_format=args.load_format,  # replayed graphs call no ops: decode kernels must run eagerly to be seen
                        log=lambda m: print(m, file=sys.stderr, flush=True))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    ops = engine.model.ops
    calls, undo = record_calls(ops)
    try:
        with torch.inference_mode():
            engine.generate([engine.tokenizer.encode(PROMPT)], SamplingParams(max_new_tokens=2, temperature=0.0))
    finally:
        undo()
    for call in calls:
        if call.op in skip:
            continue
        print(f"start {call.op}", file=sys.stderr, flush=True)
        if os.environ.get(CRASH_ENV) == call.op:
            os.kill(os.getpid(), signal.SIGSEGV)
        with torch.inference_mode():
            result = replay(call, getattr(ops, call.op), REFERENCE_OPS[call.op], engine.device)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
