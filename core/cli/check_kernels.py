"""`bringup check-kernels SOURCE --device D [--dtype T] [--json]`: every kernel the engine runs for the
model, at its shapes and dtypes, on the device against the float32 CPU reference (core/numerics)."""

from __future__ import annotations

import argparse
import json

from bringup.core.cli.engine_args import add_model_arguments


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--timeout", type=float, default=600, help="seconds the check may take (default 600)")
    parser.add_argument("--prefill-tokens", type=int, default=None,
                        help="also check the kernels of 8 prompts of this many tokens in all, prefilled in one forward "
                             "and decoded together, where fast kernels take their large-batch forms (0: none; default "
                             "2048 on an accelerator, none on cpu, whose kernels are the references)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render(report) -> str:
    from bringup.core.numerics.kernel_rows import row_label

    lines = [f"check-kernels on {report.device}: {'all pass' if report.ok else 'FAILED'}",
             f"{'kernel (phase) [variant]':<60} {'impl':<22} {'dtype':<9} {'shape':<16} {'max abs':>9} {'max rel':>9} {'tol':>7} "
             f"{'ms':>8} {'ref ms':>8}  verdict"]
    for k in report.kernels:
        verdict = k.get("verdict") or ("ok" if k["ok"] else "WRONG")
        lines.append(f"{row_label(k):<60} {k['implementation']:<22} {k['dtype']:<9} {'x'.join(map(str, k['shape'])):<16} "
                     f"{_num(k['max_abs_err'], '9.2e')} {_num(k['max_rel_err'], '9.2e')} {_num(k['tolerance'], '7.0e')} "
                     f"{_num(k['ms'], '8.3f')} {_num(k['reference_ms'], '8.3f')}  {verdict}")
    for f in report.findings:
        lines.append(f"{f.severity}: {f.explanation}" + (f"\n  fix: {f.fix}" if f.fix else ""))
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from bringup.core.errors import UserError
    from bringup.core.numerics.check_kernels import run_check

    if args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout} must be above 0")
    if args.prefill_tokens is not None and args.prefill_tokens < 0:
        raise UserError(f"--prefill-tokens {args.prefill_tokens} must be 0 or more")
    report = run_check(args.source, device=args.device, dtype=args.dtype, load_format=args.load_format,
                       timeout=args.timeout, prefill_tokens=args.prefill_tokens)
    print(json.dumps(report.to_json(), indent=2) if args.json else render(report))
    return 0 if report.ok else 1
