"""`bringup bench SOURCE --device D --num-seqs N --input-len MIN:MAX --output-len MIN:MAX --seed S`:
output tokens/s of the embedded engine against transformers' `generate`, same checkpoint, device
and workload, in one run (after nano-vllm's bench: random lengths, fixed seed, ignore_eos)."""

from __future__ import annotations

import argparse
import json
import sys

from bringup.core.cli.engine_args import add_model_arguments
from bringup.core.errors import UserError


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--num-seqs", type=int, default=16, help="requests in the workload (default 16)")
    parser.add_argument("--input-len", default="16:64", help="prompt length range MIN:MAX (default 16:64)")
    parser.add_argument("--output-len", default="16:64", help="output length range MIN:MAX (default 16:64)")
    parser.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    parser.add_argument("--baseline", default="transformers", help="transformers (default) or none")
    parser.add_argument("--max-running-requests", type=int, default=None,
                        help="engine batch size cap (the baseline uses the same batch size)")
    parser.add_argument("--mem-fraction", type=float, default=None, help="share of device memory for the engine")
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs of the workload per side, the fastest counts (default 3 on the CPU, 1 elsewhere)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def main(args: argparse.Namespace) -> int:
    from bringup.core.bench.throughput import BenchSettings, parse_range, run_bench

    if args.num_seqs < 1:
        raise UserError(f"--num-seqs {args.num_seqs} must be at least 1")
    from bringup.core.engine.config import EngineConfig

    engine = EngineConfig.from_args(args)  # the engine's own checks (--mem-fraction, --cpu-threads...)
    if args.repeats is not None and args.repeats < 1:
        raise UserError(f"--repeats {args.repeats} must be at least 1")
    if args.seed < 0:
        raise UserError(f"--seed {args.seed} must be >= 0")
    baseline = None if args.baseline.lower() in ("none", "") else args.baseline.lower()
    settings = BenchSettings(
        source=engine.model, device=engine.device, dtype=engine.dtype, num_seqs=args.num_seqs,
        input_len=parse_range(args.input_len, "--input-len"), output_len=parse_range(args.output_len, "--output-len"),
        seed=args.seed, baseline=baseline, max_running_requests=engine.max_running_requests,
        mem_fraction=engine.mem_fraction, load_format=engine.load_format, cpu_threads=engine.cpu_threads,
        repeats=args.repeats, cpu_compile=engine.cpu_compile,
    )
    # Progress goes to stderr with --json, so stdout holds exactly one JSON document.
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else (lambda m: print(m, flush=True))
    result = run_bench(settings, log=log)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    return 0
