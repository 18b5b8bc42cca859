"""The verdict of an A/B comparison, against a threshold measured on noise alone.

Noise is what one engine gives against itself when only the batch around a prompt changes (the
prompts one at a time, then all at once): the reductions run in another order, and in bf16 that
moves logprobs and flips near-tied tokens. A kernel that is wrong moves them further. So the
threshold is taken from such a calibration pair, with a margin, and floors that keep an exactly
repeatable engine (float32 on a CPU, whose calibration shows no noise at all) from calling any
rounding a failure. When the two runs compute in different dtypes, the calibration runs on the less
precise side and the floor is that dtype's rounding floor (precision.py): bf16 against float32 is
judged against bf16's noise, not float32's. The threshold's `rule` says which floor holds and why.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .agreement import PromptAgreement, distribution
from .precision import ROUNDOFF_NATS, UNIT_ROUNDOFF, dtype_name, rounding_floor, short

MARGIN = 3.0  # how far past the noise seen in calibration a difference must be to count
FLOOR_LOGPROB_DIFF = 0.02  # nats: a p99 logprob difference below this is rounding at any precision
FLOOR_GAP = 0.25  # nats: two tokens this close in one run's own logprobs are a near-tie
# Where the runs part without logprobs (a server answering /generate with token ids only), only A's own batch
# noise is known: a near-tie that another dtype or device rounds the other way looks the same as a
# wrong kernel. Said with the verdict, with the way to find out.
NO_LOGPROBS = ("without logprobs at the parting a near-tie cannot be told from a wrong kernel (a dtype or device "
               "change can pick the other of two near-equal tokens): for two of our engine's settings, "
               "`bringup ab --layers SOURCE --a ... --b ...` follows the same request into the blocks")


@dataclass
class Threshold:
    logprob_diff_p99: float  # the p99 |lp_A - lp_B| over shared tokens beyond which the runs differ
    divergence_gap: float  # a parting where both runs were surer than this is not a near-tie
    noisy_prompts: list[str]  # prompts whose answer changed with the batch alone (for servers without logprobs)
    source: str  # what it was measured on
    dtype: str | None = None  # the precision whose noise it is (the less precise side's), None: not known
    rule: str = ""  # which floor holds and where it comes from, as the output says it

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Threshold":
        return cls(float(data["logprob_diff_p99"]), float(data["divergence_gap"]),
                   [str(p) for p in data.get("noisy_prompts", [])], str(data.get("source", "")),
                   dtype_name(data.get("dtype")), str(data.get("rule", "")))

    @property
    def noise_name(self) -> str:
        """'bf16 noise', or plain 'noise' where the precision is not known."""
        return f"{short(self.dtype)} noise" if self.dtype else "noise"


def calibrate(noise: list[PromptAgreement], source: str, dtype: str | None = None) -> Threshold:
    """The threshold from one engine against itself with different batch compositions, run in
    `dtype` (the less precise side's, when the A/B compares two): never below that dtype's rounding floor."""
    diffs = [d for r in noise for d in r.logprob_diffs]
    p99 = distribution(diffs)["p99"] or 0.0
    gaps = [r.divergence.gap for r in noise if r.divergence is not None and r.divergence.gap is not None]
    dtype = dtype_name(dtype)
    rounding = rounding_floor(dtype)
    floor = max(FLOOR_LOGPROB_DIFF, rounding)
    measured = MARGIN * p99
    limit = max(floor, measured)
    if measured >= floor:
        rule = f"{MARGIN:g} x the p99 {p99:.3f} of the batch noise ({source})"
    elif rounding > FLOOR_LOGPROB_DIFF:
        rule = (f"{short(dtype)} side's rounding floor, {ROUNDOFF_NATS:g} roundoffs of {dtype} (2^{math.log2(UNIT_ROUNDOFF[dtype]):.0f}) "
                f"(core/compare/precision.py), above {MARGIN:g} x the p99 {p99:.3f} of its batch noise ({source})")
    else:
        rule = (f"the least floor{f' ({short(dtype)} rounds finer)' if dtype else ''}, above {MARGIN:g} x the p99 "
                f"{p99:.3f} of the batch noise ({source})")
    # two tokens whose logprobs each move by the floor can swap places up to twice it apart: a near-tie
    gap = max(FLOOR_GAP, 2 * floor, MARGIN * max(gaps, default=0.0))
    return Threshold(limit, gap, [r.prompt for r in noise if r.divergence is not None], source, dtype,
                     f"floor {limit:.3f} nats: {rule}")


@dataclass
class Verdict:
    word: str  # "agree", "noise" or "differ"
    reason: str
    wrong_prompts: list[str]


def judge(results: list[PromptAgreement], threshold: Threshold) -> Verdict:
    diffs = [d for r in results for d in r.logprob_diffs]
    p99 = distribution(diffs)["p99"]
    wrong, reasons = [], []
    for r in results:
        d = r.divergence
        if d is None:
            continue
        if d.gap is not None:
            if d.gap > threshold.divergence_gap:
                wrong.append(r.prompt)
                reasons.append(f"{r.prompt[:30]!r} parts at {r.unit[:-1] if r.unit != 'text' else 'character'} "
                               f"{d.position} with both runs sure of their own token (gap {d.gap:.2f} > "
                               f"{threshold.divergence_gap:.2f} nats)")
        elif r.prompt not in threshold.noisy_prompts:
            wrong.append(r.prompt)
            reasons.append(f"{r.prompt[:30]!r} parts at {d.position}, and the batch alone never changed its answer")
    if p99 is not None and p99 > threshold.logprob_diff_p99:
        reasons.append(f"the shared tokens' logprobs differ by {p99:.3f} nats at p99, past the {threshold.noise_name} "
                       f"threshold {threshold.logprob_diff_p99:.3f} ({threshold.rule or threshold.source})")
    if any(r.prompt in wrong and r.divergence.gap is None for r in results):
        reasons.append(NO_LOGPROBS)
    if wrong or reasons:
        return Verdict("differ", "; ".join(reasons), wrong)
    within = ("" if p99 is None else
              f"; the logprobs agree within {threshold.noise_name} (p99 {p99:.3f} <= {threshold.logprob_diff_p99:.3f} nats)")
    where = threshold.rule or f"threshold from {threshold.source}"
    if any(r.divergence is not None for r in results):
        return Verdict("noise", "the answers part only at near-ties or where the batch alone changed the answer"
                                f"{within} ({where})", [])
    return Verdict("agree", f"every answer is the same token for token{within} ({where})", [])
