"""`bringup check-kernels SOURCE --device D [--dtype T] [--json]`: every kernel the engine runs for the
model, at its shapes and dtypes, on the device against the float32 CPU reference (core/numerics)."""

from __future__ import annotations

import argparse
import json

from bringup.core.cli.engine_args import add_model_arguments


def configure(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--timeout", type=float, default=600, help="seconds the check may take (default 600)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render(report) -> str:
    lines = [f"check-kernels on {report.device}: {'all pass' if report.ok else 'FAILED'}",
             f"{'kernel':<30} {'impl':<22} {'dtype':<9} {'shape':<16} {'max abs':>9} {'max rel':>9} {'tol':>7} "
             f"{'ms':>8} {'ref ms':>8}  verdict"]
    for k in report.kernels:
        verdict = k.get("verdict") or ("ok" if k["ok"] else "WRONG")
        lines.append(f"{k['name']:<30} {k['implementation']:<22} {k['dtype']:<9} {'x'.join(map(str, k['shape'])):<16} "
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
    report = run_check(args.source, device=args.device, dtype=args.dtype, load_format=args.load_format,
                       timeout=args.timeout)
    print(json.dumps(report.to_json(), indent=2) if args.json else render(report))
    return 0 if report.ok else 1
