"""`bringup check-kernels`: every kernel the engine runs for a model, on a device, against the reference.

The work is a child process (kernels_child.py) that prints one JSON line per kind of kernel call
(op, phase: prefill or decode, variant: options such as a sliding window). A kernel that
kills the child (a segfault in a driver) or hangs it is recorded as `crashed` / `timeout`, becomes a
finding, and a fresh child checks the rest without it (as the device probe does).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from bringup.core.finding import Finding

from .children import run_child
from .kernel_rows import row_label, split_key

MAX_CHILDREN = 4  # a fresh child after each crash, at most this many in all


@dataclass
class KernelReport:
    device: str
    kernels: list[dict]
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.kernels) and all(k["ok"] for k in self.kernels) and not self.findings

    def to_json(self) -> dict:
        return {"device": self.device, "ok": self.ok, "kernels": self.kernels,
                "findings": [f.to_json() for f in self.findings]}


def _started(stderr: str) -> str | None:
    starts = [line.removeprefix("start ").strip() for line in stderr.splitlines() if line.startswith("start ")]
    return starts[-1] if starts else None


def run_check(source, *, device="cpu", dtype="auto", load_format: str | None = None,
              timeout: float = 600, prefill_tokens: int | None = None) -> KernelReport:
    """`prefill_tokens`: the long prompt's length (0: none); left out, 2048 on an accelerator, none on the CPU."""
    from bringup.core.errors import UserError
    from bringup.core.exit_status import exit_text, likely_cause

    kernels: list[dict] = []
    findings: list[Finding] = []
    skip: list[str] = []
    for _ in range(MAX_CHILDREN):
        args = [source or "default", "--device", device, "--dtype", dtype]
        if load_format:
            args += ["--load-format", load_format]
        if prefill_tokens is not None:
            args += ["--prefill-tokens", str(prefill_tokens)]
        for key in skip:
            args += ["--skip", key]
        child = run_child("bringup.core.numerics.kernels_child", args, timeout=timeout)
        if child.returncode == 2 and "error: " in child.stderr:
            raise UserError(child.stderr.strip().splitlines()[-1].removeprefix("error: "))
        done = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
        kernels += done
        skip += [k["key"] for k in done]  # a fresh child checks only what is left
        if child.returncode == 0:
            break
        culprit = _started(child.stderr)
        if culprit is None or culprit in {k.get("key") for k in done}:  # it died before or between kernels
            findings.append(Finding.check(
                "KERNEL_CHECK_FAILED", "error",
                f"the kernel check on {device} {exit_text(child.returncode) if child.returncode is not None else 'hung'} "
                f"before a kernel ran: {child.tail()}", fix="read the last lines; `bringup probe` checks the device"))
            break
        verdict = "timeout" if child.returncode is None else "crashed"
        cause = likely_cause(child.returncode) if child.returncode is not None else ""
        how = (f"hung (no result after {timeout:.0f} s)" if verdict == "timeout"
               else exit_text(child.returncode) + (f" ({cause})" if cause else ""))
        op, phase, variant = split_key(culprit)
        kernels.append({"name": op, "phase": phase, "variant": variant, "key": culprit, "implementation": "",
                        "shape": [], "dtype": dtype, "max_abs_err": None,
                        "max_rel_err": None, "tolerance": None, "ok": False, "ms": None, "reference_ms": None,
                        "verdict": verdict})
        findings.append(Finding.check(
            "KERNEL_CRASHED" if verdict == "crashed" else "KERNEL_HUNG", "error",
            f"kernel {row_label(kernels[-1])} on {device}: the process {how}", stage="first forward",
            fix=f"BRINGUP_KERNELS=reference runs the plain reference of {op} instead; report it with this output"))
        skip.append(culprit)
    return KernelReport(device, kernels, findings + result_findings(kernels, device))


def result_findings(kernels: list[dict], device: str) -> list[Finding]:
    """A finding for each row that ran and was wrong, or that could not be checked (no reference)."""
    findings = []
    for k in kernels:
        if k.get("verdict") == "no reference":
            findings.append(Finding.check(
                "KERNEL_UNCHECKED", "error",
                f"kernel {row_label(k)} ({k['implementation']}) on {device} is called by the engine but has no "
                f"reference to check it against", stage="first forward",
                fix="add its plain-torch form to kernels/reference (OPS, or the extras in core/numerics/kernel_calls.py)"))
        elif k.get("verdict") is None and not k["ok"]:
            findings.append(Finding.check(
                "KERNEL_WRONG", "error",
                f"kernel {row_label(k)} ({k['implementation']}) on {device} in {k['dtype']}: max relative error "
                f"{k['max_rel_err']:.1e} exceeds {k['tolerance']:.0e} (max abs {k['max_abs_err']:.2e})",
                fix=f"BRINGUP_KERNELS=reference runs the plain reference of {k['name']} instead", stage="first forward"))
    return findings
