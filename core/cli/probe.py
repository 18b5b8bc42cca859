"""`bringup probe [--json]`: the devices and libraries this machine really has.

The probe runs in child processes (core/probe/runner.py), so a step that crashes or hangs is reported as a
finding naming the step and the command still answers.
"""

from __future__ import annotations

import argparse
import json

from bringup.core.errors import UserError

_MARK = {"ok": "ok", "absent": "-", "failed": "FAILED", "skipped": "skipped", "crashed": "CRASHED", "timeout": "TIMEOUT"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds each probe step may take (default 60)")
    parser.add_argument("--steps", default=None, help="comma-separated subset of probe steps (default: all)")
    parser.add_argument("--simulate", default=None, help=argparse.SUPPRESS)  # "crash:STEP,hang:STEP", for demos/tests


def main(args: argparse.Namespace) -> int:
    from bringup.core.probe.runner import run_probe

    if args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout:g} must be a positive number of seconds, e.g. --timeout 30")
    steps = [s.strip() for s in args.steps.split(",") if s.strip()] if args.steps else None
    try:
        report = run_probe(timeout=args.timeout, steps=steps, simulate=args.simulate)
    except ValueError as err:
        raise UserError(f"{err}") from err
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(render(report))
    return 0 if report.ok else 1


def _gib(n) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def render(report) -> str:
    lines = [f"Probe: {len(report.steps)} steps in {report.seconds:.1f} s "
             f"({report.children} process{'es' if report.children > 1 else ''})"]
    for layer in ("libraries", "runtime"):
        lines.append(f"\n{layer.capitalize()}")
        for s in (s for s in report.steps if s.layer == layer):
            lines.append(f"  {_MARK.get(s.verdict, s.verdict):<8} {s.name:<15} {s.detail}")
    lines.append("\nDevices")
    for kind, dev in report.devices.items():
        if dev.available:
            for d in dev.devices or [{}]:
                mem = f"{_gib(d.get('total_memory'))} total, {_gib(d.get('free_memory'))} free"
                versions = ", ".join(f"{k} {v}" for k, v in (("runtime", dev.runtime_version), ("driver", dev.driver_version)) if v)
                lines.append(f"  {kind:<5} {d.get('index', 0)}: {d.get('name', '?')}, {mem}{', ' + versions if versions else ''}")
            if dev.verdict != "ok":
                lines.append(f"        {dev.verdict}: {dev.detail}")
        else:
            lines.append(f"  {kind:<5} {dev.verdict}: {dev.detail}")
    if report.findings:
        lines.append("\nFindings")
        for f in report.findings:
            lines.append(f"  {f.severity.upper():<7} {f.code}: {f.message}")
            if f.fix:
                lines.append(f"          fix: {f.fix}")
            if f.engine_message:
                lines.append("          output: " + f.engine_message.strip().replace("\n", "\n                  "))
    return "\n".join(lines)
