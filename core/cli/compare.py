"""`bringup compare SOURCE --device D [--reference-device cpu] [--prompt TEXT] [--perturb-layer N] [--json]`:
each block's output on the device against the float32 CPU reference, and the first block beyond
tolerance (core/numerics/compare.py).

`bringup compare SOURCE --sglang-dump DIR [--pass N]`: the blocks of an SGLang run's per-layer dump
(--debug-tensor-dump-output-folder DIR) against the same reference (core/numerics/sglang_compare.py)."""

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
                        help="relative error a block may have (default by dtype: float32 1e-3, float16 1e-2, bfloat16 5e-2; "
                             "a GGUF model's kept blocks: their products' bfloat16)")
    parser.add_argument("--own-routing", action="store_true",
                        help="let the reference pick its own MoE experts (by default it follows the device's, and "
                             "tokens that chose differently are counted as routing flips apart from the error)")
    parser.add_argument("--sglang-dump", default=None, metavar="DIR",
                        help="compare an SGLang run's per-layer dump (the folder given to its "
                             "--debug-tensor-dump-output-folder) instead of running the engine on --device")
    parser.add_argument("--pass", dest="pass_index", type=int, default=None, metavar="N",
                        help="with --sglang-dump: the forward pass to compare (default: the first full prefill)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds each run may take (default 600)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _num(value) -> str:
    return f"{value:>10.2e}" if value is not None else f"{'-':>10}"


def render(result) -> str:
    where = f" ({result.source_file})" if result.source_file else ""
    follows = ", reference follows its MoE routing" if result.routing_followed else ""
    weights = f" ({result.weights})" if result.weights else ""
    lines = [f"compare: {result.device}{where} {result.dtype}{weights} against {result.reference}{follows}, "
             f"{result.num_tokens} prompt tokens, tolerance {result.tolerance:.0e}",
             f"{'block':>5}  {'mixer':<12} {'ffn':<6} {'rel err':>10} {'max abs':>10} {'flips':>6}"]
    first = result.first_divergent_layer
    for l in result.layers:
        mark = "  <- first beyond tolerance" if l.index == first else ("  (not in the dump)" if l.rel_err is None else "")
        flips = "" if l.routing_flips is None else str(l.routing_flips)
        lines.append(f"{l.index:>5}  {l.mixer:<12} {l.ffn:<6} {_num(l.rel_err)} {_num(l.max_abs_err)} {flips:>6}{mark}")
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
    from bringup.core.numerics.sglang_compare import run_sglang_compare

    if args.tolerance is not None and not args.tolerance > 0:
        raise UserError(f"--tolerance {args.tolerance} must be above 0")
    if args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout} must be above 0")
    if args.sglang_dump is not None:
        for flag, value in (("--perturb-layer", args.perturb_layer), ("--prompt", args.prompt)):
            if value is not None:
                raise UserError(f"{flag} does not go with --sglang-dump: the dump's own tokens and outputs are compared")
    elif args.pass_index is not None:
        raise UserError("--pass goes with --sglang-dump DIR (it picks a pass of the dump)")
    try:
        if args.sglang_dump is not None:
            result = run_sglang_compare(args.source, args.sglang_dump, pass_index=args.pass_index,
                                        reference_device=args.reference_device, tolerance=args.tolerance,
                                        own_routing=args.own_routing, timeout=args.timeout)
        else:
            result = run_compare(args.source, device=args.device, dtype=args.dtype,
                                 reference_device=args.reference_device, prompt=args.prompt or DEFAULT_PROMPT,
                                 perturb_layer=args.perturb_layer, tolerance=args.tolerance,
                                 own_routing=args.own_routing, load_format=args.load_format, timeout=args.timeout)
    except CompareFailed as failed:  # a run crashed or hung: a finding, said the same way as a divergence
        if args.json:
            print(json.dumps({"tolerance": args.tolerance, "first_divergent_layer": None, "layers": [],
                              "findings": [failed.finding.to_json()]}, indent=2))
        else:
            print(f"error: {failed.finding.explanation}\n  fix: {failed.finding.fix}", file=sys.stderr)
        return 1
    print(json.dumps(result.to_json(), indent=2) if args.json else render(result))
    return 1 if result.first_divergent_layer is not None else 0
