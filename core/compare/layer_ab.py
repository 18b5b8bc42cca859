"""The layer-level A/B: one request through our engine under two settings (device, dtype, kernel
set), B reading A's tokens and experts, compared block by block and step by step (divergence.py).

A setting is `key=value,...` with keys device, dtype, kernels (BRINGUP_KERNELS: reference, or the
engine's own choice), load_format, and fault (faults.py, a known fault to see it found); or
`dump=DIR`, another engine's per-layer tensor dump (dump_trace.py: SGLang's), read instead of run:
our side then reads the dump's prompt, tokens and experts. Two dumps are compared over the steps
where both read the same tokens.
When B computes in a less precise dtype than A, a third run, the reference kernels in B's dtype on
B's device without B's fault, follows A too: its distance from A at each block and step is the
rounding alone, and B's tolerance there is that plus a kernel's own rounding (divergence.py).
Each side runs as a child process: a crash or a hang is a message, never the caller's end.
The traces keep digests (digest.py); `full` names places kept whole to look into (look.py):
"STEP:BLOCK,...", or "first" to run both sides again keeping the place the digests found.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bringup.core.errors import UserError
from bringup.core.numerics.children import can_ask_for_stacks

from .divergence import LayerDivergence, compare_traces
from .precision import KERNEL_ROUNDOFFS, STATE_NOISE_FACTOR, dtype_name, less_precise, roundoff, short
from .trace import PROGRESS, STACKS_ENV

STACK_FRAMES = 12  # innermost frames of a stalled child's stack shown
KEYS = ("device", "dtype", "kernels", "load_format", "fault", "dump")


@dataclass
class Setting:
    device: str = "cpu"
    dtype: str = "float32"
    kernels: str | None = None  # None: the engine's own choice
    load_format: str | None = None
    fault: str | None = None
    dump: str | None = None  # a dump folder: read, not run
    label: str = ""

    def env(self) -> dict:
        return {"BRINGUP_KERNELS": self.kernels} if self.kernels else {}

    def describe(self) -> str:
        if self.dump:
            return self.label or f"SGLang dump {self.dump}"
        kernels = self.kernels or "engine's choice"
        return self.label or ", ".join([self.device, self.dtype, f"kernels {kernels}"] + ([f"fault {self.fault}"] if self.fault else []))


def parse_setting(text: str) -> Setting:
    values = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in KEYS or not value:
            raise UserError(f"setting {item!r} is not KEY=VALUE with KEY one of {', '.join(KEYS)} "
                            "(e.g. kernels=reference,dtype=float32)")
        values[key] = value
    if "dump" in values and len(values) > 1:
        raise UserError(f"setting {text!r}: dump=DIR is read as the server wrote it; it takes no other key")
    if "fault" in values:
        from .faults import parse_fault

        parse_fault(values["fault"])  # refused here, before any child starts
    return Setting(**values)


@dataclass
class LayerAB:
    source: str
    a: Setting
    b: Setting
    prompt_ids: list[int]
    divergence: LayerDivergence
    implementations: dict[str, dict] = field(default_factory=dict)
    looks: list[dict] = field(default_factory=list)  # look.py, where tensors were kept whole


def _trace_args(source, s: Setting, prompt_file: Path, steps: int, out: Path, follow: Path | None,
                own_routing: bool, full: str = "") -> list[str]:
    args = [str(source), "--device", s.device, "--dtype", s.dtype, "--prompt-ids", str(prompt_file),
            "--steps", str(steps), "--out", str(out)]
    if full:
        args += ["--full", full]
    if s.load_format:
        args += ["--load-format", s.load_format]
    if s.fault:
        args += ["--fault", s.fault]
    if follow:
        args += ["--follow", str(follow)]
    if own_routing:
        args.append("--own-routing")
    return args


def stalled(stderr: str) -> str:
    """What a child that ran past its time was doing: its last `trace:` stage, and the innermost
    frames of its main thread's stack where it wrote one (on the SIGUSR1 sent before it was ended)."""
    lines = stderr.splitlines()
    stages = [ln[len(PROGRESS):] for ln in lines if ln.startswith(PROGRESS)]
    text = f"it was at: {stages[-1]}" if stages else "it wrote no stage (stuck before importing torch?)"
    starts = [i for i, ln in enumerate(lines) if ln.startswith(("Current thread", "Thread 0x"))]
    main = next((i for i in reversed(starts) if lines[i].startswith("Current thread")), starts[-1] if starts else None)
    if main is not None:
        frames = []
        for ln in lines[main + 1:]:
            if not ln.startswith("  File "):
                break
            frames.append(ln.strip())
        text += "\nits stack (most recent call first):\n  " + "\n  ".join(frames[:STACK_FRAMES])
        if any(f"{os.sep}triton{os.sep}" in f or "/triton/" in f for f in frames):
            # (seen on a fresh H200: the first traced prefill compiled Triton kernels for over 28 s)
            text += ("\nit was compiling Triton kernels, not stuck: the first run on a machine compiles each "
                     "kernel once (Triton's cache keeps them for later runs); run again or give --timeout more")
    elif not can_ask_for_stacks():
        text += (f"\n(no stack: a running child cannot be asked for one here; {STACKS_ENV}=S has it write "
                 "its own whenever S seconds pass without a new stage)")
    return text


def _run(which: str, args: list[str], env: dict, out: Path, timeout: float, progress=None) -> dict:
    import torch

    from bringup.core.numerics.children import run_child

    def line(text: str) -> None:
        if progress is not None and text.startswith(PROGRESS):
            progress(f"{which}: {text[len(PROGRESS):]}")

    child = run_child("bringup.core.compare.trace", args, env=env, timeout=timeout, on_line=line,
                      stacks_on_timeout=True)
    if child.returncode is None:
        raise UserError(f"run {which} did not finish in {timeout:.0f} s (--timeout sets it); {stalled(child.stderr)}")
    if child.returncode != 0 or not out.is_file():
        message = next((ln[len("error: "):] for ln in child.stderr.splitlines() if ln.startswith("error: ")), None)
        raise UserError(f"run {which}: {message}" if message else
                        f"run {which} failed (exit {child.returncode}); last lines:\n{child.tail()}")
    return torch.load(out, weights_only=False)


def _read_dump(setting: Setting, source, steps: int, keep: str) -> dict:
    from .dump_trace import dump_trace
    from .trace import parse_places

    return dump_trace(setting.dump, source, steps=steps, keep_full=parse_places(keep))


def common_steps(a: dict, b: dict) -> tuple[dict, dict]:
    """Two dumps, each its server's own run: compared over the steps where both read the same tokens
    (after a different pick, the two runs read different text and their blocks say nothing)."""
    if a["prompt_ids"] != b["prompt_ids"]:
        raise UserError("the two dumps' first requests are different prompts: send both servers the same prompt")
    n = 1
    while n < min(len(a["steps"]), len(b["steps"])) and a["steps"][n]["input_ids"] == b["steps"][n]["input_ids"]:
        n += 1
    return ({**a, "steps": a["steps"][:n], "sampled": a["sampled"][:n]},
            {**b, "steps": b["steps"][:n], "sampled": b["sampled"][:n]})


def first_place(d: LayerDivergence) -> tuple[int, int] | None:
    """Where to look: the state that parts first when it parts before any output, else the first output."""
    if d.first_state is not None and (d.first is None or d.first_state.step < d.first.step):
        return d.first_state.step, d.first_state.block
    return (d.first.step, d.first.block) if d.first is not None else None


def noise_setting(a: Setting, b: Setting) -> Setting | None:
    """The run that measures B's rounding alone: the reference kernels in B's dtype, on B's device,
    without B's fault; None where B is not less precise than A (or either is a dump)."""
    if a.dump or b.dump:
        return None
    da, db = dtype_name(a.dtype), dtype_name(b.dtype)
    if da is None or db is None or da == db or less_precise(da, db) != db:
        return None
    return Setting(device=b.device, dtype=b.dtype, kernels="reference", load_format=b.load_format,
                   label=f"{b.device}, {b.dtype}, reference kernels (B's rounding alone)")


def calibration_text(c: Setting, dtype: str) -> str:
    return (f"per block and step, the distance of {c.device} {dtype} reference kernels from A + "
            f"{KERNEL_ROUNDOFFS:g} roundoffs of {dtype} ({KERNEL_ROUNDOFFS * roundoff(dtype):.1e}); for a recurrent state, "
            f"{STATE_NOISE_FACTOR:g} x that distance where more (a chunked scan rounds each term of the state's sum; "
            "core/compare/precision.py)")


def run_layer_ab(source, a: Setting, b: Setting, *, prompt_ids: list[int] | None = None, steps: int = 4,
                 own_routing: bool = False, tolerance: float | None = None, timeout: float = 600,
                 full: str = "", progress=None) -> LayerAB:
    from .look import look_at
    from .trace import parse_places

    if steps < 0:
        raise UserError("--steps must be 0 (the prefill only) or more")
    places = parse_places("" if full == "first" else full)
    prompt_ids = list(prompt_ids or [5, 6, 7, 8, 9, 10, 11, 12])
    names = (a.describe(), b.describe())
    calib = noise_setting(a, b) if tolerance is None else None
    if calib is not None and b.kernels == "reference" and not b.fault:
        calib = None  # B is that run: its own rounding is all there is to see, the fixed tolerance judges it

    def both(keep: str):
        with tempfile.TemporaryDirectory(prefix="bringup-ab-") as tmp:
            tmp = Path(tmp)
            dumps = {w: _read_dump(s, source, steps, keep) for w, s in (("A", a), ("B", b)) if s.dump}
            if len(dumps) == 2:
                trace_a, trace_b = common_steps(dumps["A"], dumps["B"])
            else:
                # a dump leads (our side reads its tokens and experts); else A leads and B follows it
                lead, follow = ("B", "A") if "B" in dumps else ("A", "B")
                settings = {"A": a, "B": b}
                ids = dumps[lead]["prompt_ids"] if dumps else prompt_ids
                n = len(dumps[lead]["steps"]) - 1 if dumps else steps
                prompt_file = tmp / "prompt.json"
                prompt_file.write_text(json.dumps(ids))
                out = {"A": tmp / "a.pt", "B": tmp / "b.pt"}
                traces = {}
                if dumps:
                    import torch

                    traces[lead] = dumps[lead]
                    torch.save(traces[lead], out[lead])
                else:
                    traces[lead] = _run(lead, _trace_args(source, settings[lead], prompt_file, n, out[lead], None, False,
                                                          keep), settings[lead].env(), out[lead], timeout, progress)
                traces[follow] = _run(follow, _trace_args(source, settings[follow], prompt_file, n, out[follow],
                                                          out[lead], own_routing, keep), settings[follow].env(),
                                      out[follow], timeout, progress)
                trace_a, trace_b = traces["A"], traces["B"]
                if calib is not None:  # (no dumps here: noise_setting refuses them)
                    out_c = tmp / "noise.pt"
                    trace_c = _run("B's rounding alone", _trace_args(source, calib, prompt_file, n, out_c, out["A"], False),
                                   calib.env(), out_c, timeout, progress)
                    noise = compare_traces(trace_a, trace_c)
                    return trace_a, trace_b, compare_traces(
                        trace_a, trace_b, followed_routing=not own_routing, names=names, noise=noise,
                        extra=KERNEL_ROUNDOFFS * roundoff(calib.dtype), calibration=calibration_text(calib, calib.dtype),
                        noise_name=f"{short(calib.dtype)} noise", state_factor=STATE_NOISE_FACTOR)
        return trace_a, trace_b, compare_traces(trace_a, trace_b, tolerance=tolerance,
                                                followed_routing=not own_routing and len(dumps) < 2,
                                                names=names)

    trace_a, trace_b, divergence = both(full if full != "first" else "")
    if full == "first" and (place := first_place(divergence)) is not None:
        places = {place}
        trace_a, trace_b, divergence = both(f"{place[0]}:{place[1]}")  # the same run again, that place kept whole
    looks = [item for step, block in sorted(places) if step < len(trace_a["steps"])
             for item in look_at(trace_a, trace_b, step, block)]
    if a.dump or b.dump:
        prompt_ids = (trace_a.get("prompt_ids") or trace_b.get("prompt_ids") or prompt_ids)
    return LayerAB(str(source), a, b, prompt_ids, divergence,
                   {"A": trace_a["implementations"], "B": trace_b["implementations"]}, looks)
