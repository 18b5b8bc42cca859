"""The verdict of an A/B comparison, against a threshold measured on noise alone.

Noise is what one engine gives against itself when only the batch around a prompt changes (the
prompts one at a time, then all at once): the reductions run in another order, and in bf16 that
moves logprobs and flips near-tied tokens. A kernel that is wrong moves them further. So the
threshold is taken from such a calibration pair, with a margin, and floors that keep an exactly
repeatable engine (float32 on a CPU, whose calibration shows no noise at all) from calling any
rounding a failure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .agreement import PromptAgreement, distribution

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

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Threshold":
        return cls(float(data["logprob_diff_p99"]), float(data["divergence_gap"]),
                   [str(p) for p in data.get("noisy_prompts", [])], str(data.get("source", "")))


def calibrate(noise: list[PromptAgreement], source: str) -> Threshold:
    """The threshold from one engine against itself with different batch compositions."""
    diffs = [d for r in noise for d in r.logprob_diffs]
    p99 = distribution(diffs)["p99"] or 0.0
    gaps = [r.divergence.gap for r in noise if r.divergence is not None and r.divergence.gap is not None]
    return Threshold(max(FLOOR_LOGPROB_DIFF, MARGIN * p99), max(FLOOR_GAP, MARGIN * max(gaps, default=0.0)),
                     [r.prompt for r in noise if r.divergence is not None], source)


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
        reasons.append(f"the shared tokens' logprobs differ by {p99:.3f} nats at p99, past the noise threshold "
                       f"{threshold.logprob_diff_p99:.3f}")
    if any(r.prompt in wrong and r.divergence.gap is None for r in results):
        reasons.append(NO_LOGPROBS)
    if wrong or reasons:
        return Verdict("differ", "; ".join(reasons), wrong)
    if any(r.divergence is not None for r in results):
        return Verdict("noise", "the answers part only at near-ties or where the batch alone changed the answer "
                                f"(threshold from {threshold.source})", [])
    return Verdict("agree", f"every answer is the same token for token (threshold from {threshold.source})", [])
