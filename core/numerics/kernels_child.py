"""The child of `bringup check-kernels`: record the kernel calls of a few requests (below), then
replay each against the reference; one JSON line per kind of call on stdout, as each finishes.

    python -m bringup.core.numerics.kernels_child SOURCE --device D [--dtype T] [--prefill-tokens N] [--skip KEY ...]

Each kind of call is one row (kernel_calls.KernelCall.key: `op@phase[:variant]`), so an op checked
at prefill size and at decode size is two rows. Before each it prints "start KEY" on stderr, so
that the parent can name the kernel that crashed or hung the process (and start a fresh child that
skips it). A kernel the engine called that has no reference is a row too ("no reference").

The workload: a short prompt (phase "prefill") and its decode step ("decode"), one request, as at
batch 1; then, on an accelerator, BATCH_PROMPTS prompts of LONG_PREFILL_TOKENS in all, prefilled in
one forward ("long prefill") and decoded together ("batch decode"): varlen over several sequences,
and the sizes where the fast kernels take their large-batch forms (the sorted MoE above 4 tokens,
its 128-row blocks and wide tile, the multi-program sort; the router and dense MLP kernels hand
over to cuBLAS).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

PROMPT = "Check every kernel at this model's shapes."
# Names one op (or one call's key) whose check kills the child with SIGSEGV: how tests (and users)
# see a crash become a finding.
CRASH_ENV = "BRINGUP_KERNEL_CHECK_CRASH"
LONG_PREFILL_TOKENS = 2048  # the engine's default prefill chunk
BATCH_PROMPTS = 8


def engine_settings(long_prefill: int) -> dict:
    """The Engine arguments of the check: pools for its requests only, eager decode (replayed
    graphs call no ops, and the CPU's compiled step fuses most of them, so decode kernels must run
    eagerly to be seen)."""
    # (room for the batch's pages, each request's last page partly empty: all prompts in one forward)
    return dict(max_running_requests=BATCH_PROMPTS, max_total_tokens=max(256, 2 * long_prefill + 512),
                chunked_prefill_size=max(2048, long_prefill), cuda_graphs=False, cpu_compile=False)


def batch_lengths(total: int, n: int = BATCH_PROMPTS) -> list[int]:
    """`total` tokens as n prompts of different lengths (1 : 2 : ... : n), for varlen to have work."""
    n = max(1, min(n, total))
    lengths = [max(1, total * (i + 1) // (n * (n + 1) // 2)) for i in range(n - 1)]
    return lengths + [total - sum(lengths)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bringup.core.numerics.kernels_child")
    parser.add_argument("source")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--skip", action="append", default=[], help="a call's key; repeat for several")
    parser.add_argument("--load-format", default="auto")
    parser.add_argument("--prefill-tokens", type=int, default=None,
                        help=f"tokens of the long prompt (0: none; default {LONG_PREFILL_TOKENS} on an accelerator, 0 on cpu)")
    args = parser.parse_args(argv)
    from bringup.core.sources.default_model import resolve_default
    from bringup.core.engine.device import resolve_device
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.errors import UserError

    skip = set(args.skip)
    try:
        source = resolve_default(args.source) or args.source
        long = args.prefill_tokens
        if long is None:
            long = 0 if resolve_device(args.device).type == "cpu" else LONG_PREFILL_TOKENS
        if long < 0:
            raise UserError(f"--prefill-tokens {long} must be 0 or more")
        config = EngineConfig(source, device=args.device, dtype=args.dtype, load_format=args.load_format,
                              **engine_settings(long))
        engine = Engine(config, log=lambda m: print(m, file=sys.stderr, flush=True))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for row in check_engine(engine, skip, crash=os.environ.get(CRASH_ENV), long_prefill=long):
        print(json.dumps(row), flush=True)
    return 0


def run_workload(engine, long_prefill: int = 0, phase=None) -> None:
    """The check's requests: the short prompt and its decode step alone, then (`long_prefill` > 0)
    BATCH_PROMPTS prompts of `long_prefill` tokens in all, together. `phase`: a PhaseTracker, told
    the names of the second part's phases."""
    import torch

    from bringup.core.engine.sampling import SamplingParams

    from .kernel_calls import BATCH_DECODE, LONG_PREFILL

    prompt = engine.tokenizer.encode(PROMPT)
    with torch.inference_mode():
        engine.generate([prompt], SamplingParams(max_new_tokens=2, temperature=0.0, ignore_eos=True))
        long_prefill = min(long_prefill, (getattr(engine, "max_context", None) or long_prefill + 2) - 2)
        if long_prefill > len(prompt):
            if phase is not None:
                phase.prefill, phase.decode = LONG_PREFILL, BATCH_DECODE
            text = prompt * (long_prefill // len(prompt) + 1)
            engine.generate([text[i:i + n] for i, n in enumerate(batch_lengths(long_prefill))],
                            SamplingParams(max_new_tokens=3, temperature=0.0, ignore_eos=True))


def check_engine(engine, skip=(), crash=None, long_prefill: int = 0):
    """Record `run_workload`'s kernel calls, then yield one result per kind of call (in the order
    first called), each replayed against its reference; then the same for a GGUF model's quantized
    layers (quantized_calls.py). `crash`: an op or key whose check kills the process (tests)."""
    import torch

    from .kernel_calls import PhaseTracker, describe, record_calls, reference_for, replay
    from .quantized_calls import record_quantized_calls, reference_layers, replay_quantized

    phase = PhaseTracker()
    hook = engine.model.register_forward_pre_hook(phase.hook)
    calls, undo = record_calls(engine.model.ops, lambda: phase.phase)
    quantized, undo_quantized = record_quantized_calls(engine.model, lambda: phase.phase)
    try:
        run_workload(engine, long_prefill, phase)
    finally:
        undo()
        undo_quantized()
        hook.remove()
    for call in calls:
        if call.key in skip:
            continue
        _starting(call, crash)
        reference = reference_for(call.op)
        if reference is None:
            yield {**describe(call), "max_abs_err": None, "max_rel_err": None, "tolerance": None, "ok": False,
                   "ms": None, "reference_ms": None, "verdict": "no reference"}
            continue
        with torch.inference_mode():
            yield replay(call, getattr(engine.model.ops, call.op), reference[0], engine.device, combine=reference[1])
    quantized = [call for call in quantized if call.key not in skip]
    if quantized:
        reference_model = reference_layers(engine.folder)  # the file's blocks, as the layers' reference reads them
        for call in quantized:
            _starting(call, crash)
            with torch.inference_mode():
                yield replay_quantized(call, engine.model, reference_model, engine.device)


def _starting(call, crash) -> None:
    """Tell the parent which call runs next (it names the one that kills or hangs the process)."""
    print(f"start {call.key}", file=sys.stderr, flush=True)
    if crash in (call.op, call.key):
        os.kill(os.getpid(), signal.SIGSEGV)

if __name__ == "__main__":
    sys.exit(main())
