"""How far two greedy answers to one prompt agree: the tokens they share from the start, the first
position where they part (both tokens, and how far each run's logprob says the other's token was
behind its own), and the logprob differences over the shared tokens.

After the first divergence the two runs continue from different text, so nothing past it is
compared. Tokens are compared as what the servers give: token ids, token strings (OpenAI logprobs),
or, when the two give different kinds, the decoded text character by character.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Answer:
    """One server's greedy answer to one prompt."""

    text: str
    tokens: list | None = None  # ids (int) or token strings, in order; None when the server gives neither
    kind: str = "text"  # "ids", "pieces" (token strings) or "text"
    logprobs: list[float] | None = None  # of each chosen token
    top: list[dict[str, float]] | None = None  # the top alternatives at each position (token string -> logprob)

    def units(self, kind: str) -> list:
        return list(self.text) if kind == "text" else list(self.tokens or [])


@dataclass
class Divergence:
    position: int  # in tokens (or characters when unit == "text")
    a: object
    b: object
    a_gap: float | None = None  # A's logprob of its own token minus A's logprob of B's token (>= 0); None: unknown
    b_gap: float | None = None

    @property
    def gap(self) -> float | None:
        """How decided the runs were where they parted: the smaller of the two gaps (a near-tie is small)."""
        gaps = [g for g in (self.a_gap, self.b_gap) if g is not None]
        return min(gaps) if gaps else None


@dataclass
class PromptAgreement:
    prompt: str
    unit: str  # "ids", "pieces" or "text"
    length: int  # the longer answer, in units
    matched: int  # units shared from the start
    divergence: Divergence | None
    logprob_diffs: list[float] = field(default_factory=list)  # |lp_A - lp_B| per shared token

    @property
    def agreement(self) -> float:
        return 1.0 if self.length == 0 else self.matched / self.length


def common_unit(a: Answer, b: Answer) -> str:
    return a.kind if a.kind == b.kind and a.kind != "text" else "text"


def compare_answers(prompt: str, a: Answer, b: Answer) -> PromptAgreement:
    unit = common_unit(a, b)
    ua, ub = a.units(unit), b.units(unit)
    matched = 0
    while matched < min(len(ua), len(ub)) and ua[matched] == ub[matched]:
        matched += 1
    divergence = None
    if matched < max(len(ua), len(ub)) and matched < min(len(ua), len(ub)):
        divergence = Divergence(matched, ua[matched], ub[matched])
        if unit == "pieces":
            divergence.a_gap = _gap(a, matched, ub[matched])
            divergence.b_gap = _gap(b, matched, ua[matched])
    elif matched < max(len(ua), len(ub)):  # one answer stopped early (an end-of-sequence the other did not pick)
        longer = ua if len(ua) > len(ub) else ub
        divergence = Divergence(matched, longer[matched] if longer is ua else None, longer[matched] if longer is ub else None)
    diffs = []
    if unit != "text" and a.logprobs is not None and b.logprobs is not None:
        diffs = [abs(x - y) for x, y in zip(a.logprobs[:matched], b.logprobs[:matched])
                 if math.isfinite(x) and math.isfinite(y)]
    return PromptAgreement(prompt, unit, max(len(ua), len(ub)), matched, divergence, diffs)


def _gap(answer: Answer, position: int, other_token) -> float | None:
    """Own token's logprob minus the other run's token's logprob at `position`, from the top list;
    when the other token is not among the top ones, the gap is at least own - lowest listed."""
    if answer.logprobs is None or answer.top is None or position >= len(answer.top):
        return None
    own, top = answer.logprobs[position], answer.top[position] or {}
    if other_token in top:
        return max(0.0, own - top[other_token])
    return max(0.0, own - min(top.values())) if top else None


def quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def distribution(values: list[float]) -> dict:
    """The logprob differences as the table shows them: count, median, p90, p99, max."""
    return {"count": len(values), "p50": quantile(values, 0.5), "p90": quantile(values, 0.9),
            "p99": quantile(values, 0.99), "max": max(values) if values else None}
