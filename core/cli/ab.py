"""`bringup ab URL_A URL_B [--prompts FILE] [--max-tokens N] [--json]`: the same prompts, greedy,
to two running servers (ours, SGLang, vLLM, llama.cpp's): token agreement per prompt, the first
divergent position with both tokens and their logprob gap, the logprob differences, and a verdict
against a threshold calibrated on A with the batch changed (core/compare/ab.py).

`bringup ab --layers SOURCE --a SETTING --b SETTING [--steps N]`: one request through our engine
under two settings (e.g. `kernels=reference` against `dtype=bfloat16`), or an SGLang run's tensor
dump (`dump=DIR`) against our engine or another dump, block by block and step by step, the first
block and step where they part, routing flips apart (core/compare/layer_ab.py).
Exit 1 when they differ (beyond noise), 0 when they agree."""

from __future__ import annotations

import argparse
import json
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="+", metavar="URL_A URL_B | SOURCE",
                        help="two server URLs; with --layers, one model SOURCE")
    parser.add_argument("--prompts", metavar="FILE", help="one prompt per line, or a JSON list (default: a fixed set)")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per answer (default 32)")
    parser.add_argument("--api-key-a", default=None, help="API key of server A")
    parser.add_argument("--api-key-b", default=None, help="API key of server B")
    parser.add_argument("--model", default=None, help="the model name to send (servers that need one)")
    parser.add_argument("--dtype-a", default=None, metavar="DTYPE",
                        help="the dtype server A computes in (float32, float16, bfloat16), where its /server_info "
                             "does not say: the noise floor is the less precise side's")
    parser.add_argument("--dtype-b", default=None, metavar="DTYPE", help="the same for server B")
    parser.add_argument("--calibration", metavar="FILE", default=None,
                        help="a threshold saved by --save-calibration, instead of calibrating on A now")
    parser.add_argument("--save-calibration", metavar="FILE", default=None, help="write the threshold used to FILE")
    parser.add_argument("--layers", action="store_true", help="the layer-level form: SOURCE under --a and --b")
    parser.add_argument("--a", default="kernels=reference,dtype=float32",
                        help="setting A: key=value,... of device, dtype, kernels, load_format, fault "
                             "(default kernels=reference,dtype=float32); or dump=DIR, an SGLang "
                             "--debug-tensor-dump-output-folder read as a run (the other side reads its tokens)")
    parser.add_argument("--b", default="dtype=float32", help="setting B (default dtype=float32: the engine's kernels)")
    parser.add_argument("--steps", type=int, default=4, help="decode steps after the prefill (default 4)")
    parser.add_argument("--prompt-ids", default=None, help="the request as comma-separated token ids")
    parser.add_argument("--prompt-len", type=int, default=None, metavar="N",
                        help="a request of N fixed token ids (below 1000, so any vocabulary holds them) instead")
    parser.add_argument("--own-routing", action="store_true", help="B picks its own MoE experts instead of A's")
    parser.add_argument("--full", default="", metavar="first|STEP:BLOCK,...",
                        help="keep these block outputs (and states) whole and show where inside them the error sits; "
                             "'first' runs both again to look into the first place they part (traces keep "
                             "checksums and a sketch otherwise)")
    parser.add_argument("--tolerance", type=float, default=None, help="relative error a block may have (default by dtype)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds each run may take")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def render_ab(result) -> str:
    da, db = (f", {d}" if d else "" for d in result.dtypes)
    lines = [f"A {result.a} ({result.modes[0]}{da})  B {result.b} ({result.modes[1]}{db}), {result.max_tokens} tokens each",
             f"{'agree':>6}  {'parts at':>8}  {'A':<14} {'B':<14} {'gap':>6}  prompt"]
    for r in result.prompts:
        d = r.divergence
        where = "-" if d is None else str(d.position)
        gap = "" if d is None or d.gap is None else f"{d.gap:.2f}"
        a = "" if d is None else repr(d.a)[:14]
        b = "" if d is None else repr(d.b)[:14]
        lines.append(f"{r.agreement:>6.0%}  {where:>8}  {a:<14} {b:<14} {gap:>6}  {r.prompt[:40]}")
    dist = result.to_json()["logprob_diffs"]
    if dist["count"]:
        lines.append(f"logprob differences over {dist['count']} shared tokens: median {dist['p50']:.4f}, "
                     f"p90 {dist['p90']:.4f}, p99 {dist['p99']:.4f}, max {dist['max']:.4f} nats")
    t = result.threshold
    lines.append(f"threshold: p99 {t.logprob_diff_p99:.3f} nats, divergence gap {t.divergence_gap:.2f} nats "
                 f"({t.rule or t.source})")
    lines.append(f"verdict: {result.verdict.word}: {result.verdict.reason}")
    return "\n".join(lines)


def render_layers(result) -> str:
    from bringup.core.compare.divergence import describe, flips_text

    d = result.divergence
    kinds = {i: f"{m}/{f}" for i, m, f in d.layers}
    worst = ["-" if r.worst_block is None else f"{r.worst_block} {kinds.get(r.worst_block, '')}" for r in d.steps]
    width = max([18] + [len(w) for w in worst])  # a long block kind (sliding_attention/moe) keeps the columns
    lines = [f"A: {result.a.describe()}", f"B: {result.b.describe()}",
             f"{'step':>4}  {'kind':<8} {'token A':>8} {'B own':>6}  {'worst block':<{width}} {'rel err':>9}  flips"]
    for r, w in zip(d.steps, worst):
        lines.append(f"{r.step:>4}  {r.kind:<8} {str(r.token_a):>8} {str(r.token_b_own):>6}  {w:<{width}} "
                     f"{r.worst_rel_err:>9.2e}  {flips_text(r.flips)}")
    lines.append(describe(d))
    for look in result.looks:
        if "error" in look:
            lines.append(f"step {look['step']} block {look['block']} {look['what']}: {look['error']}")
            continue
        rows = ", ".join(f"{i} ({e:.1e})" for i, e in look["worst_rows"])
        cols = ", ".join(f"{i} ({e:.1e})" for i, e in look["worst_columns"])
        lines.append(f"step {look['step']} block {look['block']} {look['what']} {tuple(look['shape'])}: exact rel err "
                     f"{look['rel_err']:.2e}, max |diff| {look['max_abs_diff']:.3g} at {tuple(look['max_at'])}; "
                     f"worst rows {rows}; worst columns {cols}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from bringup.core.errors import UserError

    if args.max_tokens < 1:
        raise UserError(f"--max-tokens {args.max_tokens} must be 1 or more")
    if args.layers:
        return _layers(args)
    if len(args.targets) != 2:
        raise UserError("give two server URLs (bringup ab URL_A URL_B), or --layers SOURCE for two engine settings")
    from bringup.core.compare.ab import Server, read_prompts, run_ab
    from bringup.core.compare.verdict import Threshold

    threshold = None
    if args.calibration:
        try:
            with open(args.calibration, encoding="utf-8") as f:
                threshold = Threshold.from_json(json.load(f))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise UserError(f"--calibration {args.calibration}: not a saved threshold ({err})") from None
    prompts = read_prompts(args.prompts) if args.prompts else None
    a = Server(args.targets[0], args.api_key_a, model=args.model, dtype=args.dtype_a)
    b = Server(args.targets[1], args.api_key_b, model=args.model, dtype=args.dtype_b)
    result = run_ab(a, b, prompts, max_tokens=args.max_tokens, threshold=threshold)
    if args.save_calibration:
        with open(args.save_calibration, "w", encoding="utf-8") as f:
            json.dump(result.threshold.to_json(), f, indent=2)
    print(json.dumps(result.to_json(), indent=2) if args.json else render_ab(result))
    return 1 if result.verdict.word == "differ" else 0


def _layers(args) -> int:
    from bringup.core.compare.layer_ab import parse_setting, run_layer_ab
    from bringup.core.errors import UserError

    if len(args.targets) != 1:
        raise UserError("--layers takes one model SOURCE (e.g. default, or a checkpoint folder)")
    ids = None
    if args.prompt_ids:
        try:
            ids = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
        except ValueError:
            raise UserError(f"--prompt-ids {args.prompt_ids!r}: give comma-separated token ids, e.g. 5,6,7") from None
    elif args.prompt_len is not None:
        if args.prompt_len < 1:
            raise UserError(f"--prompt-len {args.prompt_len} must be 1 or more")
        ids = [3 + (i * 37) % 997 for i in range(args.prompt_len)]
    result = run_layer_ab(args.targets[0], parse_setting(args.a), parse_setting(args.b), prompt_ids=ids,
                          steps=args.steps, own_routing=args.own_routing, tolerance=args.tolerance,
                          timeout=args.timeout, full=args.full.strip(),
                          progress=lambda line: print(line, file=sys.stderr, flush=True))
    d = result.divergence
    print(json.dumps({"source": result.source, "a": result.a.describe(), "b": result.b.describe(),
                      "prompt_ids": result.prompt_ids, **d.to_json(), "looks": result.looks}, indent=2)
          if args.json else render_layers(result))
    return 1 if (d.first is not None or d.first_state is not None) else 0
