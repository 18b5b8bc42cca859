"""Sampling parameters, batched sampling, incremental detokenization and stop strings."""

import pytest
import torch

from bringup.core.engine.detokenize import IncrementalDetokenizer
from bringup.core.engine.sampling import (
                                          InvalidSamplingParams, SamplingParams, make_generator, sample, top_k_mask, top_p_mask,
                                          )


@pytest.mark.parametrize("kwargs, words", [
    ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
    ({"temperature": -0.5}, "temperature must be >= 0"),
    ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
    ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
    ({"top_k": -2}, "top_k must be >= -1"),
    ({"seed": "x"}, "seed must be an integer"),
    ({"stop": [""]}, "stop must be non-empty strings"),
    ({"max_new_tokens": 2.5}, "max_new_tokens must be an integer"),
    ({"stop_token_ids": [-1]}, "stop_token_ids entry must be >= 0"),
])
def test_bad_params_are_refused_with_the_reason(kwargs, words):
    with pytest.raises(InvalidSamplingParams, match=words):
        SamplingParams(**kwargs)


def test_params_normalise_and_from_dict():
    p = SamplingParams.from_dict({"stop": "END", "stop_token_ids": [7], "temperature": 0})
    assert p.stop == ("END",) and p.stop_token_ids == (7,) and p.greedy
    with pytest.raises(InvalidSamplingParams, match=r"unknown sampling parameter\(s\) \['frequency'\]"):
        SamplingParams.from_dict({"frequency": 1})


def test_greedy_rows_are_argmax():
    logits = torch.randn(5, 50, generator=torch.Generator().manual_seed(0))
    params = [SamplingParams(temperature=0)] * 5
    assert torch.equal(sample(logits, params, [None] * 5), logits.argmax(-1))


def test_top_k_keeps_k_largest():
    logits = torch.tensor([[1.0, 5.0, 3.0, 4.0, 2.0], [1.0, 2.0, 3.0, 4.0, 5.0]])
    out = top_k_mask(logits, torch.tensor([2, -1]))
    assert torch.isinf(out[0]).tolist() == [True, False, True, False, True]
    assert not torch.isinf(out[1]).any()  # -1: off


def test_top_p_keeps_smallest_nucleus():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = probs.log()
    keep = ~torch.isinf(top_p_mask(logits, torch.tensor([0.7])))
    assert keep.tolist() == [[True, True, False, False]]  # 0.5 < 0.7 <= 0.8
    keep = ~torch.isinf(top_p_mask(logits, torch.tensor([0.1])))
    assert keep.tolist() == [[True, False, False, False]]  # at least the top token


def test_sampling_respects_masks_and_temperature():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0]]).repeat(200, 1)
    params = [SamplingParams(top_k=2)] * 200
    tokens = sample(logits, params, [None] * 200)
    assert set(tokens.tolist()) <= {3, 4} and len(set(tokens.tolist())) == 2
    cold = sample(logits, [SamplingParams(temperature=1e-4)] * 200, [None] * 200)
    assert set(cold.tolist()) == {4}


def test_seed_reproducible_whatever_the_batch():
    vocab = 100
    logits = torch.randn(1, vocab, generator=torch.Generator().manual_seed(1))
    seeded = SamplingParams(seed=42)

    def draw(batch_extra: int) -> list[int]:
        g = make_generator(42, "cpu")
        out = []
        for _ in range(8):
            rows = torch.cat([logits, torch.randn(batch_extra, vocab)])
            params = [seeded] + [SamplingParams()] * batch_extra
            out.append(int(sample(rows, params, [g] + [None] * batch_extra)[0]))
        return out

    first, second = draw(0), draw(3)
    assert first == second
    assert len(set(first)) > 1  # really sampling, not greedy
    g = make_generator(43, "cpu")
    other = [int(sample(logits, [SamplingParams(seed=43)], [g])[0]) for _ in range(8)]
    assert other != first


@pytest.fixture(scope="module")
def tokenizer():
    from bringup.core.sources.default_model import build_tokenizer

    return build_tokenizer(400)


def _stream(tokenizer, text, stop=()):
    ids = tokenizer.encode(text, add_special_tokens=False)
    detok = IncrementalDetokenizer(tokenizer, tokenizer.encode("Hello", add_special_tokens=False), stop)
    pieces = []
    stopped = False
    for t in ids:
        stopped = detok.add(t)
        pieces.append(detok.take())
        if stopped:
            break
    pieces.append(detok.take(final=True))
    return pieces, stopped, detok


def test_incremental_text_equals_full_decode(tokenizer):
    text = "The quick brown fox, naïve café — 日本語 ok!"
    pieces, stopped, _ = _stream(tokenizer, text)
    assert not stopped
    assert "".join(pieces) == text
    assert sum(1 for p in pieces if p) > 3  # it really streamed


def test_stop_string_trimmed_and_never_streamed(tokenizer):
    pieces, stopped, detok = _stream(tokenizer, "alpha beta STOP gamma delta", stop=("STOP",))
    assert stopped and detok.stopped_by == "STOP"
    assert "".join(pieces) == "alpha beta "
    assert all("ST" not in p for p in pieces)


def test_earliest_of_several_stops_wins(tokenizer):
    pieces, stopped, detok = _stream(tokenizer, "one two three four", stop=("four", "two"))
    assert stopped and "".join(pieces) == "one " and detok.stopped_by == "two"


@pytest.mark.parametrize("settings", [{"temperature": 1e-46}, {"temperature": 1e-300}, {"temperature": 5e-6},
                                      {"top_p": 1e-46}, {"top_p": 1e-300}])
def test_vanishing_temperature_or_top_p_is_greedy(settings):
    # Dividing by a denormal temperature, or a top_p that is 0 in float32, once gave NaN -> token 0.
    torch.manual_seed(0)
    logits = torch.randn(3, 50)
    logits[:, 0] = -5.0  # token 0 is never the best: a NaN fallback would show
    params = [SamplingParams(**settings)] * 3
    assert sample(logits, params, [None] * 3).tolist() == logits.argmax(-1).tolist()


@pytest.mark.parametrize("kwargs, words", [
    ({"temperature": float("inf")}, "temperature must be a finite number"),
    ({"seed": 2**70}, "seed must be <="),
])
def test_out_of_range_values_are_refused_not_crashed_on(kwargs, words):
    with pytest.raises(InvalidSamplingParams, match=words):
        SamplingParams(**kwargs)
