"""`bringup compare`: the same prompt through the engine on a device and through the reference (the
engine with the plain reference kernels, in float32, on the CPU); each block's output compared.

Each run is a child process (capture.py); a run that crashes or hangs is a finding, not a traceback.
The relative error of a block is ||device - reference|| / ||reference|| over all prompt tokens; the
first block whose relative error passes the tolerance is the finding ("block 12 (attention) first
exceeds 1e-2: 3.4e-1"). Errors grow along the stack, so the first block beyond is where to look.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bringup.core.finding import Finding

from .children import ChildResult, run_child

DEFAULT_PROMPT = "The quick brown fox jumps over the lazy dog. Bring-up numerics check."
# The relative error a block may have, by the device run's dtype: float32 differs from the reference
# only by summation order; half precisions by their rounding (about 2^-8 for bfloat16), grown along the stack.
TOLERANCES = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 5e-2}


@dataclass
class LayerError:
    index: int
    mixer: str
    ffn: str
    rel_err: float
    max_abs_err: float

    @property
    def kind(self) -> str:
        return self.mixer if self.mixer != "none" else self.ffn

    def to_json(self) -> dict:
        return {"index": self.index, "mixer": self.mixer, "ffn": self.ffn, "rel_err": self.rel_err,
                "max_abs_err": self.max_abs_err}


@dataclass
class CompareResult:
    tolerance: float
    layers: list[LayerError]
    device: str = ""
    dtype: str = ""
    implementations: dict = field(default_factory=dict)
    reference_implementations: dict = field(default_factory=dict)
    num_tokens: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def first_divergent_layer(self) -> int | None:
        return next((l.index for l in self.layers if not l.rel_err <= self.tolerance), None)  # NaN diverges

    def to_json(self) -> dict:
        return {"tolerance": self.tolerance, "first_divergent_layer": self.first_divergent_layer,
                "layers": [l.to_json() for l in self.layers], "device": self.device, "dtype": self.dtype,
                "num_tokens": self.num_tokens, "implementations": self.implementations,
                "reference_implementations": self.reference_implementations,
                "findings": [f.to_json() for f in self.findings]}


def block_errors(device_run: dict, reference_run: dict) -> list[LayerError]:
    """Per block: relative error (Frobenius norms over the prompt's tokens) and max abs error."""
    import torch

    out = []
    for index, mixer, ffn in reference_run["layers"]:
        ref = reference_run["blocks"][index].double()
        got = device_run["blocks"][index].double()
        diff = got - ref
        norm = ref.norm().item()
        rel = diff.norm().item() / norm if norm > 0 else (0.0 if diff.norm().item() == 0 else float("inf"))
        out.append(LayerError(index, mixer, ffn, float(rel), float(diff.abs().max().item())))
    if any(torch.isnan(device_run["blocks"][i]).any() for i, *_ in reference_run["layers"]):
        for l in out:  # a NaN anywhere in a block makes it divergent, whatever the norms say
            if torch.isnan(device_run["blocks"][l.index]).any():
                l.rel_err = float("nan")
    return out


def divergence_finding(result: CompareResult) -> Finding | None:
    first = result.first_divergent_layer
    if first is None:
        return None
    layer = next(l for l in result.layers if l.index == first)
    return Finding.check(
        "BLOCK_DIVERGES", "error",
        f"block {first} ({layer.kind}) first exceeds {result.tolerance:.0e}: {layer.rel_err:.1e} relative error "
        f"(max abs {layer.max_abs_err:.2e}) on {result.device} in {result.dtype} against the float32 CPU reference",
        fix=f"check the kernels block {first}'s {layer.kind} runs on this device (`bringup check-kernels`); "
            "BRINGUP_KERNELS=reference on the device bisects kernel against framework",
        layers=(first,), stage="first forward")


def _capture_args(source, device, dtype, prompt, out: Path, perturb_layer) -> list[str]:
    args = [source or "default", "--device", device, "--dtype", dtype, "--prompt", prompt, "--out", str(out)]
    if perturb_layer is not None:
        args += ["--perturb-layer", str(perturb_layer)]
    return args


def _crash_finding(which: str, child: ChildResult, timeout: float) -> Finding:
    from bringup.core.exit_status import exit_text, likely_cause

    if child.returncode is None:
        what, code = f"hung: no result after {timeout:.0f} s", "COMPARE_RUN_HUNG"
    elif child.crashed:
        cause = likely_cause(child.returncode)
        what, code = exit_text(child.returncode) + (f" ({cause})" if cause else ""), "COMPARE_RUN_CRASHED"
    else:
        what, code = exit_text(child.returncode), "COMPARE_RUN_FAILED"
    return Finding.check(code, "error", f"the {which} run {what}: {child.tail() or 'no output'}",
                         fix="read the run's last lines above; `bringup diagnose` explains a saved log",
                         stage="first forward")


class CompareFailed(Exception):
    def __init__(self, finding: Finding):
        super().__init__(finding.explanation)
        self.finding = finding


def run_compare(source, *, device="cpu", dtype="auto", reference_device="cpu", prompt=DEFAULT_PROMPT,
                perturb_layer=None, tolerance=None, timeout: float = 600) -> CompareResult:
    import torch

    with tempfile.TemporaryDirectory(prefix="bringup-compare-") as tmp:
        dev_out, ref_out = Path(tmp) / "device.pt", Path(tmp) / "reference.pt"
        # The device run first: it checks the arguments (a bad --perturb-layer) before the reference costs anything.
        runs = (("device", dev_out, device, dtype, perturb_layer, {}),
                ("reference", ref_out, reference_device, "float32", None, {"BRINGUP_KERNELS": "reference"}))
        for which, out, dev, dt, perturb, env in runs:
            child = run_child("bringup.core.numerics.capture",
                              _capture_args(source, dev, dt, prompt, out, perturb), env=env, timeout=timeout)
            if child.returncode == 2 and "error: " in child.stderr:  # bad input: the child's own message
                from bringup.core.errors import UserError

                raise UserError(child.stderr.strip().splitlines()[-1].removeprefix("error: "))
            if child.returncode != 0 or not out.is_file():
                raise CompareFailed(_crash_finding(which, child, timeout))
        device_run = torch.load(dev_out, weights_only=False)
        reference_run = torch.load(ref_out, weights_only=False)
    tol = tolerance if tolerance is not None else TOLERANCES.get(device_run["dtype"], 1e-2)
    result = CompareResult(tol, block_errors(device_run, reference_run), device=device_run["device"],
                           dtype=device_run["dtype"], implementations=device_run["implementations"],
                           reference_implementations=reference_run["implementations"],
                           num_tokens=device_run["num_tokens"])
    finding = divergence_finding(result)
    if finding is not None:
        result.findings.append(finding)
    return result
