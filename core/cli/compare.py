"""`bringup compare SOURCE --device D [--reference-device cpu] [--prompt TEXT] [--perturb-layer N] [--json]`:
each block's output on the device against the float32 CPU reference, and the first block beyond
tolerance (core/numerics/compare.py)."""

from __future__ import annotations

import argparse
import json
import sys

from bringup.core.cli.engine_args import add_model_arguments


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--reference-device", default="cpu",
                        help="where the reference runs (default cpu; plain reference kernels in float32)")
    parser.add_argument("--prompt", default=None, help="the text both runs read (default: a fixed sentence)")
    parser.add_argument("--perturb-layer", type=int, default=None,
                        help="inject a known fault (10%% noise) at block N of the device run, to see it caught")
    parser.add_argument("--tolerance", type=float, default=None,
                        help="relative error a block may have (default by dtype: float32 1e-3, float16 1e-2, bfloat16 5e-2)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds each run may take (default 600)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def render(result) -> str:
    lines = [f"compare: {result.device} {result.dtype} against the float32 CPU reference, "
             f"{result.num_tokens} prompt tokens, tolerance {result.tolerance:.0e}",
             f"{'block':>5}  {'mixer':<12} {'ffn':<6} {'rel err':>10} {'max abs':>10}"]
    first = result.first_divergent_layer
    for l in result.layers:
        mark = "  <- first beyond tolerance" if l.index == first else ""
        lines.append(f"{l.index:>5}  {l.mixer:<12} {l.ffn:<6} {l.rel_err:>10.2e} {l.max_abs_err:>10.2e}{mark}")
    if first is None:
        lines.append(f"no block exceeds {result.tolerance:.0e}")
    for f in result.findings:
        lines.append(f"{f.severity}: {f.explanation}")
        if f.fix:
            lines.append(f"  fix: {f.fix}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from bringup.core.errors import UserError
    from bringup.core.numerics.compare import DEFAULT_PROMPT, CompareFailed, run_compare

    if args.tolerance is not None and not args.tolerance > 0:
        raise UserError(f"--tolerance {args.tolerance} must be above 0")
    if args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout} must be above 0")
    try:
        result = run_compare(args.source, device=args.device, dtype=args.dtype,
                             reference_device=args.reference_device, prompt=args.prompt or DEFAULT_PROMPT,
                             perturb_layer=args.perturb_layer, tolerance=args.tolerance, timeout=args.timeout)
    except CompareFailed as failed:  # a run crashed or hung: a finding, said the same way as a divergence
        if args.json:
            print(json.dumps({"tolerance": args.tolerance, "first_divergent_layer": None, "layers": [],
                              "findings": [failed.finding.to_json()]}, indent=2))
        else:
            print(f"error: {failed.finding.explanation}\n  fix: {failed.finding.fix}", file=sys.stderr)
        return 1
    print(json.dumps(result.to_json(), indent=2) if args.json else render(result))
    return 1 if result.first_divergent_layer is not None else 0
