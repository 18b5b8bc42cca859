"""`bringup compare`: the same prompt through the engine on a device and through the reference (the
engine with the plain reference kernels, in float32, on the CPU); each block's output compared.

Each run is a child process (capture.py); a run that crashes or hangs is a finding, not a traceback.
The relative error of a block is ||device - reference|| / ||reference|| over all prompt tokens; the
first block whose relative error passes the tolerance is the finding ("block 12 (attention) first
exceeds 1e-2: 3.4e-1"). Errors grow along the stack, so the first block beyond is where to look.

MoE blocks: the reference follows the device's routing (routing.py), so a near-tied token that picks
another expert in half precision is counted as a routing flip (reported per block, apart from the
error) instead of making its block look divergent. `own_routing=True` lets the reference route by itself.
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


# More than this share of a block's tokens choosing other experts is no near-tie: the router is wrong.
ROUTING_FLIP_ERROR_SHARE = 0.25


@dataclass
class LayerError:
    index: int
    mixer: str
    ffn: str
    rel_err: float | None  # None: not compared (a block an SGLang dump does not hold)
    max_abs_err: float | None
    routing_flips: int | None = None  # MoE blocks: tokens whose expert set differs from the reference's own

    @property
    def kind(self) -> str:
        return self.mixer if self.mixer != "none" else self.ffn

    def to_json(self) -> dict:
        return {"index": self.index, "mixer": self.mixer, "ffn": self.ffn, "rel_err": self.rel_err,
                "max_abs_err": self.max_abs_err, "routing_flips": self.routing_flips}


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
    reference: str = "the float32 CPU reference"
    routing_followed: bool = False  # the reference used the device's expert choices
    source_file: str = ""  # an SGLang dump's pass file
    weights: str = ""  # what the device run's weights ran as, where quantized ("GGUF Q4_1, Q8_0 blocks, bfloat16 products")

    @property
    def first_divergent_layer(self) -> int | None:
        return next((l.index for l in self.layers if l.rel_err is not None and not l.rel_err <= self.tolerance),
                    None)  # NaN diverges

    def to_json(self) -> dict:
        flips = {str(l.index): l.routing_flips for l in self.layers if l.routing_flips is not None}
        return {"tolerance": self.tolerance, "first_divergent_layer": self.first_divergent_layer,
                "layers": [l.to_json() for l in self.layers], "device": self.device, "dtype": self.dtype,
                "num_tokens": self.num_tokens, "implementations": self.implementations,
                "reference": self.reference, "reference_implementations": self.reference_implementations,
                "routing": {"reference_follows_device": self.routing_followed, "flipped_tokens": flips},
                **({"source_file": self.source_file} if self.source_file else {}),
                **({"weights": self.weights} if self.weights else {}),
                "findings": [f.to_json() for f in self.findings]}


def block_errors(device_blocks: dict, reference_run: dict) -> list[LayerError]:
    """Per block: relative error (Frobenius norms over the prompt's tokens) and max abs error; a block
    `device_blocks` lacks is not compared. Routing flips are the reference run's count (it followed
    the device's routing and counted where its own choice differed)."""
    import torch

    flips = reference_run.get("routing_flips") or {}
    out = []
    for index, mixer, ffn in reference_run["layers"]:
        flip = flips.get(index) if ffn == "moe" else None
        if index not in device_blocks:
            out.append(LayerError(index, mixer, ffn, None, None, flip))
            continue
        ref = reference_run["blocks"][index].double()
        got = device_blocks[index].double()
        diff = got - ref
        norm = ref.norm().item()
        rel = diff.norm().item() / norm if norm > 0 else (0.0 if diff.norm().item() == 0 else float("inf"))
        if torch.isnan(got).any():  # a NaN anywhere in a block makes it divergent, whatever the norms say
            rel = float("nan")
        out.append(LayerError(index, mixer, ffn, float(rel), float(diff.abs().max().item()), flip))
    return out


def routing_finding(result: CompareResult) -> Finding | None:
    """The MoE blocks where tokens chose other experts than the reference would have: apart from the error."""
    flipped = [l for l in result.layers if l.routing_flips]
    if not flipped:
        return None
    n = result.num_tokens or 1
    worst = max(flipped, key=lambda l: l.routing_flips)
    wrong = worst.routing_flips / n > ROUTING_FLIP_ERROR_SHARE
    blocks = ", ".join(f"block {l.index}: {l.routing_flips} of {n}" for l in flipped)
    if result.routing_followed:
        how = ("the reference followed these choices, so the blocks' errors above measure numerics alone")
    else:
        how = "the reference routed by itself, so these tokens' outputs differ by whole experts"
    text = (f"routing flips: tokens chose another expert set than the reference's own choice ({blocks} tokens); "
            f"{how}")
    fix = (f"block {worst.index} flips {worst.routing_flips / n:.0%} of the tokens: more than near-ties explain; "
           f"check the router kernel (its route_* or router_topk_softmax op) on this device with `bringup check-kernels`" if wrong else
           "near-tied expert scores round differently in lower precision; nothing to fix unless the share grows")
    return Finding.check("MOE_ROUTING_FLIPS", "error" if wrong else "info", text, fix=fix,
                         layers=tuple(l.index for l in flipped), stage="first forward")


def divergence_finding(result: CompareResult) -> Finding | None:
    first = result.first_divergent_layer
    if first is None:
        return None
    layer = next(l for l in result.layers if l.index == first)
    flips = ""
    if layer.routing_flips and not result.routing_followed:
        flips = (f"; {layer.routing_flips} of its tokens chose other experts than the reference did, which alone "
                 "can explain it (without --own-routing the reference follows the device's routing)")
    return Finding.check(
        "BLOCK_DIVERGES", "error",
        f"block {first} ({layer.kind}) first exceeds {result.tolerance:.0e}: {layer.rel_err:.1e} relative error "
        f"(max abs {layer.max_abs_err:.2e}) on {result.device} in {result.dtype} against {result.reference}{flips}",
        fix=f"check the kernels block {first}'s {layer.kind} runs on this device (`bringup check-kernels`); "
            "BRINGUP_KERNELS=reference on the device bisects kernel against framework",
        layers=(first,), stage="first forward")


def capture_args(source, device, dtype, out: Path, *, prompt=None, input_ids: Path | None = None,
                 perturb_layer=None, follow_routing: Path | None = None, load_format=None) -> list[str]:
    args = [source or "default", "--device", device, "--dtype", dtype, "--out", str(out)]
    args += ["--input-ids", str(input_ids)] if input_ids is not None else ["--prompt", prompt]
    if perturb_layer is not None:
        args += ["--perturb-layer", str(perturb_layer)]
    if follow_routing is not None:
        args += ["--follow-routing", str(follow_routing)]
    if load_format:
        args += ["--load-format", load_format]
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


def run_capture(which: str, args: list[str], out: Path, *, env: dict | None = None, timeout: float) -> dict:
    """One capture child; its result, or a UserError (bad input) / CompareFailed (crash, hang, failure)."""
    import torch

    child = run_child("bringup.core.numerics.capture", args, env=env, timeout=timeout)
    if child.returncode == 2 and "error: " in child.stderr:  # bad input: the child's own message
        from bringup.core.errors import UserError

        raise UserError(child.stderr.strip().splitlines()[-1].removeprefix("error: "))
    if child.returncode != 0 or not out.is_file():
        raise CompareFailed(_crash_finding(which, child, timeout))
    return torch.load(out, weights_only=False)


REFERENCE_ENV = {"BRINGUP_KERNELS": "reference"}


def reference_name(reference_device: str) -> str:
    kind = str(reference_device).split(":")[0].upper() if reference_device != "cpu" else "CPU"
    return f"the float32 {kind} reference"


def run_tolerance(run: dict) -> float:
    """The tolerance of a device run: its dtype's, or, where its quantized products round in a less
    precise dtype than its activations (a GGUF model's blocks: bf16 inside, float32 around them),
    that dtype's."""
    dtypes = [run["dtype"], run.get("products_dtype") or run["dtype"]]
    return max(TOLERANCES.get(d, 1e-2) for d in dtypes)


def quantized_weights(run: dict) -> str:
    """The scheme a device run's weights ran as, named where its products are a quantized layer's."""
    if not run.get("products_dtype"):
        return ""
    return f"{run.get('weights') or 'quantized'}, {run['products_dtype']} products"


def finish(result: CompareResult) -> CompareResult:
    for finding in (divergence_finding(result), routing_finding(result)):
        if finding is not None:
            result.findings.append(finding)
    return result


def _check_dummy(load_format, device: str, reference_device: str) -> None:
    from bringup.core.errors import UserError

    if (load_format or "auto") == "dummy" and str(device).split(":")[0] != str(reference_device).split(":")[0]:
        raise UserError(f"--load-format dummy seeds its random weights per device type, so a reference on "
                        f"{reference_device} would hold other weights than the run on {device}; give "
                        f"--reference-device a {str(device).split(':')[0]} device, or a checkpoint with weights")


def run_compare(source, *, device="cpu", dtype="auto", reference_device="cpu", prompt=DEFAULT_PROMPT,
                perturb_layer=None, tolerance=None, own_routing: bool = False, load_format=None,
                timeout: float = 600) -> CompareResult:
    _check_dummy(load_format, device, reference_device)
    with tempfile.TemporaryDirectory(prefix="bringup-compare-") as tmp:
        dev_out, ref_out = Path(tmp) / "device.pt", Path(tmp) / "reference.pt"
        # The device run first: it checks the arguments (a bad --perturb-layer) before the reference costs anything.
        device_run = run_capture("device", capture_args(source, device, dtype, dev_out, prompt=prompt,
                                                        perturb_layer=perturb_layer, load_format=load_format),
                                 dev_out, timeout=timeout)
        follow = None if own_routing or not device_run["routing"] else dev_out
        reference_run = run_capture("reference", capture_args(source, reference_device, "float32", ref_out,
                                                              prompt=prompt, follow_routing=follow,
                                                              load_format=load_format),
                                    ref_out, env=REFERENCE_ENV, timeout=timeout)
    if own_routing and device_run["routing"]:  # flips still counted: the two runs' own choices
        from .routing import flipped_tokens

        reference_run["routing_flips"] = {i: flipped_tokens(ids, reference_run["routing"][i])
                                          for i, ids in device_run["routing"].items() if i in reference_run["routing"]}
    tol = tolerance if tolerance is not None else run_tolerance(device_run)
    result = CompareResult(tol, block_errors(device_run["blocks"], reference_run), device=device_run["device"],
                           dtype=device_run["dtype"], implementations=device_run["implementations"],
                           reference_implementations=reference_run["implementations"],
                           num_tokens=device_run["num_tokens"], reference=reference_name(reference_device),
                           routing_followed=follow is not None, weights=quantized_weights(device_run))
    return finish(result)
