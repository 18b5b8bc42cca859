"""Where two traces of one request part: each block's output and each recurrent layer's state,
step by step (step 0 the prefill, then one decode step per token), against a tolerance.

The first divergence is the first step, and within it the first block, whose output differs beyond
the tolerance; a state that parts before any output does (a wrong state update is only read at the
next step) is named apart, since that is where such a bug lives. A block where tokens chose other
experts is a routing flip, not arithmetic: B follows A's experts by default, so the flips are
counted and the error stays arithmetic; with its own routing a divergence at a block that flipped
is reported as the flip it is.

When B computes in a less precise dtype than A, one fixed tolerance either hides a wrong kernel in
the rounding (bf16's 5e-2 let a 2% wrong scale through) or calls the rounding a failure. So
layer_ab.py runs the reference kernels in B's dtype beside it: their distance from A at each block
and step is the rounding alone (`noise`), and B parts where it goes past that by more than a
kernel's own rounding (`extra`, precision.py's KERNEL_ROUNDOFFS). A recurrent state may also sit
`state_factor` times that noise from A, where that is more: a fast chunked scan rounds each term of
the state's sum over the tokens, which no fixed count of roundoffs bounds (precision.py's
STATE_NOISE_FACTOR says why).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .digest import Digest, digest, rel_err

TOLERANCES = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 5e-2}


def _digest(x, per_row: bool) -> Digest:
    """A trace keeps digests (digest.py); a tensor (an older trace, a test) is digested here."""
    return x if isinstance(x, Digest) else digest(x, per_row=per_row)


@dataclass
class Part:
    step: int
    kind: str  # "prefill" or "decode"
    block: int
    what: str  # "output", "conv state", "ssm state"
    rel_err: float
    cause: str = "arithmetic"  # or "routing flip"
    tolerance: float | None = None  # what it went past there (the calibrated one, where calibrated)
    rule: str = ""  # which tolerance that was: "noise + extra", "N x noise" or "fixed"


@dataclass
class StepRow:
    step: int
    kind: str
    token_a: int | None
    token_b_own: int | None  # what B would have chosen on its own (B reads A's token either way)
    worst_block: int | None
    worst_rel_err: float
    flips: dict[int, int] = field(default_factory=dict)


@dataclass
class LayerDivergence:
    a: str
    b: str
    tolerance: float
    followed_routing: bool
    first: Part | None  # the first block output beyond the tolerance
    first_state: Part | None  # the first recurrent state beyond it
    steps: list[StepRow]
    errors: dict[tuple[int, int], float]  # (step, block) -> output rel err
    state_errors: dict[tuple[int, int, str], float]  # (step, layer, "conv"|"ssm") -> rel err
    layers: list[tuple[int, str, str]]
    state_checksums: dict[str, dict] = field(default_factory=dict)  # "a"/"b" -> {(step, layer, kind): (sum, abs sum, weighted sum)}
    calibration: str = ""  # where the tolerances come from, when calibrated per block and step
    noise_name: str = ""  # "bf16 noise", when calibrated
    answer: list[float] = field(default_factory=list)  # |logprob A - B| of A's token per step (step_logprobs.py)
    answer_floor: float = 0.0  # the less precise dtype's logprob floor (verdict.py, precision.py)

    @property
    def flips(self) -> int:
        return sum(sum(r.flips.values()) for r in self.steps)

    @property
    def flips_after_parting(self) -> int:
        """Flips downstream of where the runs first part: B's own choice then reads its diverged hidden
        state, so those follow from that error rather than from near-tied experts. A state read wrong
        shows from the next step on; an output, from the next block on."""
        state = (self.first_state.step + 1, -1) if self.first_state is not None else None
        output = (self.first.step, self.first.block) if self.first is not None else None
        parted = min(p for p in (state, output) if p is not None) if (state or output) else None
        if parted is None:
            return 0
        return sum(n for r in self.steps for block, n in r.flips.items() if (r.step, block) > parted)

    def to_json(self) -> dict:
        return {"a": self.a, "b": self.b, "tolerance": self.tolerance, "calibration": self.calibration,
                "noise_name": self.noise_name, "answer_logprob_diffs": self.answer, "answer_floor": self.answer_floor,
                "followed_routing": self.followed_routing,
                "first": asdict(self.first) if self.first else None,
                "first_state": asdict(self.first_state) if self.first_state else None,
                "routing_flips": self.flips, "routing_flips_after_parting": self.flips_after_parting,
                "steps": [asdict(r) | {"flips": {str(k): v for k, v in r.flips.items()}} for r in self.steps],
                "errors": [{"step": s, "block": b, "rel_err": e} for (s, b), e in sorted(self.errors.items())],
                "state_errors": [{"step": s, "layer": l, "state": k, "rel_err": e}
                                 for (s, l, k), e in sorted(self.state_errors.items())],
                "state_checksums": [{"step": s, "layer": l, "state": k, "a": list(self.state_checksums["a"][key]),
                                     "b": list(self.state_checksums["b"][key]) if self.state_checksums["b"].get(key) else None}
                                    for key in sorted(self.state_checksums.get("a", {})) for s, l, k in [key]],
                "layers": [list(l) for l in self.layers]}


def compare_traces(a: dict, b: dict, *, tolerance: float | None = None, followed_routing: bool = True,
                   names: tuple[str, str] = ("A", "B"), noise: "LayerDivergence | None" = None, extra: float = 0.0,
                   calibration: str = "", noise_name: str = "", state_factor: float = 1.0) -> LayerDivergence:
    """B against A, block by block and step by step; with `noise` (the reference kernels in B's dtype
    against A) each place's tolerance is that noise there plus `extra` (for a state, or `state_factor`
    times the noise where that is more), else one fixed tolerance."""
    tol = tolerance if tolerance is not None else max(TOLERANCES.get(a["dtype"], 5e-2), TOLERANCES.get(b["dtype"], 5e-2))
    calibrated = noise is not None and tolerance is None

    def limit(place, seen: dict, factor: float = 1.0) -> tuple[float, str]:
        if not (calibrated and place in seen):
            return tol, "fixed"
        if factor * seen[place] > seen[place] + extra:
            return factor * seen[place], f"{factor:g} x {noise_name or 'noise'}"
        return seen[place] + extra, f"{noise_name or 'noise'} + {extra:.1e}"
    errors, state_errors, rows = {}, {}, []
    first = first_state = None
    sums = {"a": {}, "b": {}}
    for s, (sa, sb) in enumerate(zip(a["steps"], b["steps"])):
        flips = dict(sb.get("flips") or {})
        if not followed_routing:  # B chose its own experts: a flip is where the ids differ
            for block, ids in (sb.get("routing") or {}).items():
                other = (sa.get("routing") or {}).get(block)
                if other is not None:
                    from bringup.core.numerics.routing import flipped_tokens

                    n = flipped_tokens(other, ids) if other.shape == ids.shape else ids.shape[0]
                    if n:
                        flips[block] = n
        worst, worst_err = None, 0.0
        for block in sorted(sa["blocks"]):
            if block not in sb["blocks"]:
                continue
            e = errors[(s, block)] = rel_err(_digest(sa["blocks"][block], True), _digest(sb["blocks"][block], True))
            if e > worst_err:
                worst, worst_err = block, e
            t, rule = limit((s, block), noise.errors if calibrated else {})
            if first is None and e > t:
                cause = "routing flip" if (not followed_routing and flips.get(block)) else "arithmetic"
                first = Part(s, sa["kind"], block, "output", e, cause, t, rule)
        for layer in sorted(sa["conv"]):
            for kind in ("conv", "ssm"):
                ta, tb = _digest(sa[kind][layer], False), sb[kind].get(layer)
                tb = _digest(tb, False) if tb is not None else None
                sums["a"][(s, layer, kind)] = ta.checksum()
                sums["b"][(s, layer, kind)] = tb.checksum() if tb is not None else None
                if tb is None:
                    continue
                e = state_errors[(s, layer, kind)] = rel_err(ta, tb)
                t, rule = limit((s, layer, kind), noise.state_errors if calibrated else {}, state_factor)
                if first_state is None and e > t:
                    first_state = Part(s, sa["kind"], layer, f"{kind} state", e, tolerance=t, rule=rule)
        rows.append(StepRow(s, sa["kind"], sa["sampled"], sb.get("own_sample"), worst, worst_err, flips))
    from .precision import less_precise, rounding_floor
    from .step_logprobs import answer_diffs
    from .verdict import FLOOR_LOGPROB_DIFF

    worse = less_precise(a.get("dtype"), b.get("dtype"))
    return LayerDivergence(names[0], names[1], tol, followed_routing, first, first_state, rows, errors,
                           state_errors, [tuple(l) for l in a["layers"]], sums,
                           calibration if calibrated else "", noise_name if calibrated else "",
                           answer_diffs(a, b), max(FLOOR_LOGPROB_DIFF, rounding_floor(worse)))


def describe(d: LayerDivergence) -> str:
    """One paragraph: where they part and why."""
    if d.first is None and d.first_state is None:
        within = f"within {d.noise_name} ({d.calibration})" if d.calibration else f"(tolerance {d.tolerance:.0e})"
        text = f"{d.b} matches {d.a} at every block and state over {len(d.steps)} steps {within}"
    else:
        parts = []
        if d.first_state is not None and (d.first is None or d.first_state.step < d.first.step):
            p = d.first_state
            parts.append(f"layer {p.block}'s {p.what} parts first, after step {p.step} ({p.kind}; rel err "
                         f"{p.rel_err:.2e}{_past(d, p)}): a state update differs before any output does")
        if d.first is not None:
            p = d.first
            beyond = f"its {d.noise_name}" if d.calibration else f"{d.tolerance:.0e}"
            parts.append(f"the first block output beyond {beyond} is block {p.block} at step {p.step} "
                         f"({p.kind}; rel err {p.rel_err:.2e}{_past(d, p)}, {p.cause})")
        text = "; ".join(parts) + (f" (tolerances: {d.calibration})" if d.calibration else "")
    if d.answer:
        from .step_logprobs import answer_text

        text += f"; {answer_text(d.answer, d.answer_floor, d.noise_name or 'rounding')}"
    if d.flips:
        where = sorted({(r.step, blk) for r in d.steps for blk in r.flips})
        shown = ", ".join(f"block {blk} step {s}" for s, blk in where[:6])
        text += (f". Routing flips: {d.flips} token choice(s) of experts differ ({shown})"
                 + (", followed from A so they add no error" if d.followed_routing else "")
                 + (f"; {after_parting_text(d.flips, d.flips_after_parting)}" if d.flips_after_parting else ""))
    return text


def _past(d: LayerDivergence, p: Part) -> str:
    if not (d.calibration and p.tolerance is not None):
        return ""
    return f" > {p.tolerance:.2e}" + (f", {p.rule}" if p.rule else "")


def after_parting_text(flips: int, after: int) -> str:
    share = "all" if after == flips else f"{after}"
    return f"{share} of them after the runs part, following from that error, not from near-tied experts"


def flips_text(flips: dict) -> str:
    """A step's flips as `block:tokens, ...` in block order (a JSON document's keys are strings)."""
    return ", ".join(f"{block}:{n}" for block, n in sorted(flips.items(), key=lambda item: int(item[0])))
