"""The A/B metrics: agreement, the first divergent position with both tokens and their logprob
gaps, the logprob differences, and the verdict against a threshold calibrated on noise alone."""

from __future__ import annotations

import math

import pytest

from bringup.core.compare.agreement import Answer, compare_answers, distribution, quantile
from bringup.core.compare.verdict import FLOOR_GAP, FLOOR_LOGPROB_DIFF, MARGIN, Threshold, calibrate, judge


def pieces(tokens, logprobs, top=None):
    return Answer("".join(tokens), list(tokens), "pieces", list(logprobs), top)


def test_the_same_answer_agrees_fully_with_its_logprob_differences():
    a = pieces(["Paris", ".", " It"], [-0.1, -0.5, -1.0])
    b = pieces(["Paris", ".", " It"], [-0.11, -0.5, -1.2])
    r = compare_answers("p", a, b)
    assert r.agreement == 1.0 and r.matched == 3 and r.divergence is None
    assert r.logprob_diffs == pytest.approx([0.01, 0.0, 0.2])


def test_the_first_divergence_names_both_tokens_and_how_sure_each_run_was():
    a = pieces(["A", "B", "C"], [-0.1, -0.2, -0.3], [{"A": -0.1}, {"B": -0.2, "X": -0.3}, {"C": -0.3}])
    b = pieces(["A", "X", "Y"], [-0.1, -0.25, -0.3], [{"A": -0.1}, {"X": -0.25, "B": -2.25}, {"Y": -0.3}])
    r = compare_answers("p", a, b)
    d = r.divergence
    assert (d.position, d.a, d.b) == (1, "B", "X") and r.matched == 1 and r.agreement == pytest.approx(1 / 3)
    assert d.a_gap == pytest.approx(0.1) and d.b_gap == pytest.approx(2.0)
    assert d.gap == pytest.approx(0.1)  # a near-tie for A: the smaller gap decides
    assert r.logprob_diffs == [0.0]  # nothing past the divergence is compared


def test_token_ids_against_token_strings_compare_the_text():
    a = Answer("Hello world", [1, 2], "ids")
    b = pieces(["Hello", " word"], [-1, -1])
    r = compare_answers("p", a, b)
    assert r.unit == "text" and r.divergence.position == len("Hello wor") and r.divergence.a == "l"


def test_an_answer_that_stops_early_parts_where_it_stopped():
    r = compare_answers("p", Answer("", [1, 2, 3], "ids"), Answer("", [1, 2], "ids"))
    assert r.divergence.position == 2 and r.divergence.a == 3 and r.divergence.b is None


def test_the_distribution_and_quantiles():
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    d = distribution([0.0, 0.1, 0.2])
    assert d["count"] == 3 and d["max"] == 0.2 and d["p50"] == pytest.approx(0.1)
    assert distribution([])["p99"] is None


def test_calibration_takes_noise_with_a_margin_and_floors():
    quiet = [compare_answers("p", pieces(["a"], [-1.0]), pieces(["a"], [-1.0]))]
    t = calibrate(quiet, "same engine")
    assert (t.logprob_diff_p99, t.divergence_gap) == (FLOOR_LOGPROB_DIFF, FLOOR_GAP)  # exact repeat: floors only
    noisy_a = pieces(["a", "b"], [-1.0, -0.5], [{"a": -1.0}, {"b": -0.5, "c": -0.6}])
    noisy_b = pieces(["a", "c"], [-1.1, -0.55], [{"a": -1.1}, {"c": -0.55, "b": -0.7}])
    t = calibrate([compare_answers("q", noisy_a, noisy_b)], "batch of 1 against 8")
    assert t.logprob_diff_p99 == pytest.approx(max(FLOOR_LOGPROB_DIFF, MARGIN * 0.1))
    assert t.divergence_gap == pytest.approx(max(FLOOR_GAP, MARGIN * 0.1)) and t.noisy_prompts == ["q"]
    assert Threshold.from_json(t.to_json()) == t


def test_the_verdict_tells_a_near_tie_from_a_wrong_kernel():
    t = Threshold(0.05, 0.5, [], "calibration")
    same = compare_answers("s", pieces(["x"], [-1.0]), pieces(["x"], [-1.01]))
    assert judge([same], t).word == "agree"
    tie = compare_answers("t", pieces(["a", "b"], [-1, -0.5], [{}, {"b": -0.5, "c": -0.6}]),
                          pieces(["a", "c"], [-1, -0.5], [{}, {"c": -0.5, "b": -0.55}]))
    assert judge([same, tie], t).word == "noise"
    sure = compare_answers("w", pieces(["a", "b"], [-1, -0.1], [{}, {"b": -0.1, "c": -4.0}]),
                           pieces(["a", "c"], [-1, -0.1], [{}, {"c": -0.1, "b": -5.0}]))
    v = judge([same, tie, sure], t)
    assert v.word == "differ" and v.wrong_prompts == ["w"] and "gap 3.90" in v.reason
    drift = compare_answers("d", pieces(["x"] * 50, [-1.0] * 50), pieces(["x"] * 50, [-1.3] * 50))
    assert judge([drift], t).word == "differ"  # same tokens, but logprobs moved far past the noise


def test_without_logprobs_only_answers_the_batch_alone_changed_count_as_noise():
    t = Threshold(0.05, 0.5, ["fragile"], "calibration")
    parted = lambda p: compare_answers(p, Answer("", [1, 2], "ids"), Answer("", [1, 3], "ids"))
    assert judge([parted("fragile")], t).word == "noise"
    v = judge([parted("stable")], t)
    assert v.word == "differ" and "near-tie cannot be told from a wrong kernel" in v.reason and "--layers" in v.reason
    sure = compare_answers("q", pieces(["a", "b"], [-0.1, -0.01], [{"a": -0.1}, {"b": -0.01, "c": -5.0}]),
                           pieces(["a", "c"], [-0.1, -0.01], [{"a": -0.1}, {"c": -0.01, "b": -5.0}]))
    assert "near-tie cannot be told" not in judge([sure], t).reason  # with logprobs the gap tells
    assert not math.isnan(parted("x").agreement)


def test_the_floor_follows_the_less_precise_side_and_names_its_source():
    from bringup.core.compare.precision import ROUNDOFF_NATS, less_precise, rounding_floor

    assert less_precise("float32", "torch.bfloat16") == "bfloat16" and less_precise("bf16", "half") == "bfloat16"
    assert less_precise("float32", "auto") is None  # SGLang's "auto" says nothing
    quiet = [compare_answers("p", pieces(["a"], [-1.0]), pieces(["a"], [-1.0]))]
    bf16 = calibrate(quiet, "B alone against 1 at once", "bfloat16")
    assert bf16.logprob_diff_p99 == pytest.approx(ROUNDOFF_NATS * 2**-8) == pytest.approx(rounding_floor("bf16"))
    assert bf16.rule.startswith(f"floor {bf16.logprob_diff_p99:.3f} nats: bf16 side's rounding floor")
    assert "precision.py" in bf16.rule and "B alone against 1 at once" in bf16.rule
    assert bf16.divergence_gap >= 2 * bf16.logprob_diff_p99  # each of two tokens moved by the floor: a near-tie
    fp32 = calibrate(quiet, "A alone", "float32")
    assert fp32.logprob_diff_p99 == FLOOR_LOGPROB_DIFF and "least floor" in fp32.rule
    loud = [compare_answers("q", pieces(["a"] * 10, [-1.0] * 10), pieces(["a"] * 10, [-1.2] * 10))]
    measured = calibrate(loud, "B alone against 8 at once", "bfloat16")  # batch noise past the rounding floor
    assert measured.logprob_diff_p99 == pytest.approx(MARGIN * 0.2) and "3 x the p99 0.200" in measured.rule
    assert Threshold.from_json(bf16.to_json()) == bf16


def test_bf16_rounding_agrees_within_bf16_noise_and_a_shift_past_it_differs():
    """The shape of ours in float32 against ours in bfloat16 on the CPU (p99 0.03 nats over the
    shared tokens): within bf16's floor, past float32's; a kernel that moves every logprob by a tenth
    of a nat and more is past both."""
    import random

    rng = random.Random(0)
    lps = [-rng.uniform(0.1, 5.0) for _ in range(60)]
    moved = [x + rng.uniform(-0.03, 0.03) for x in lps]
    rounding = compare_answers("r", pieces(["t"] * 60, lps), pieces(["t"] * 60, moved))
    quiet = [compare_answers("p", pieces(["a"], [-1.0]), pieces(["a"], [-1.0]))]
    bf16, fp32 = calibrate(quiet, "B alone", "bfloat16"), calibrate(quiet, "A alone", "float32")
    v = judge([rounding], bf16)
    assert v.word == "agree" and "agree within bf16 noise" in v.reason and "bf16 side's rounding floor" in v.reason
    assert judge([rounding], fp32).word == "differ"
    wrong = compare_answers("w", pieces(["t"] * 60, lps), pieces(["t"] * 60, [x - rng.uniform(0.15, 0.6) for x in lps]))
    v = judge([wrong], bf16)
    assert v.word == "differ" and "past the bf16 noise threshold 0.098" in v.reason
