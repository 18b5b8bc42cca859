"""Prompt fields of /v1/completions and /generate (issue 34): shapes, counts, sizes and contexts.

Property tests over the shapes a client can send (bounded examples), with the bundled model's real
byte-level tokenizer; no server: `prepare` is what the parse worker runs on a body.
"""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bringup.core.serve.limits import Rejected, default_limits
from bringup.core.serve.protocol import (BadRequest, ParseContext, completion_work, generate_work, max_token_bytes)
from bringup.core.serve.server import prepare

VOCAB = 262
CONTEXT = 512
MAX_PROMPTS = 8
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def tokenizer():
    from bringup.core.sources.default_model import build_tokenizer

    return build_tokenizer(256)


@pytest.fixture(scope="module")
def setup(tokenizer):
    limits = default_limits({"max_running_requests": 2, "context_len": CONTEXT, "allocated": {"kv_tokens": 4096}},
                            max_prompts=MAX_PROMPTS, max_queued_tokens=3000)
    ctx = ParseContext(tokenizer, VOCAB, limits.max_prompts, context_len=CONTEXT,
                       max_queued_tokens=limits.max_queued_tokens, max_token_bytes=max_token_bytes(tokenizer))
    return ctx, limits


def run(setup, build, body: dict):
    ctx, limits = setup
    return prepare(json.dumps(body).encode(), build, ctx, limits)


token_ids = st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=CONTEXT - 1)


@PROPERTY
@given(ids=token_ids)
def test_one_token_id_list_is_one_prompt_whatever_its_length(setup, ids):
    work = run(setup, completion_work, {"prompt": ids, "max_tokens": 1})
    assert work.prompts == [ids] and not work.batch
    work = run(setup, generate_work, {"input_ids": ids, "sampling_params": {"max_new_tokens": 1}})
    assert work.prompts == [ids] and not work.batch


@PROPERTY
@given(batch=st.lists(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=40), min_size=1, max_size=20))
def test_a_list_of_token_id_lists_is_counted_as_prompts(setup, batch):
    for build, field in ((completion_work, "prompt"), (generate_work, "input_ids")):
        body = {field: batch, "max_tokens" if field == "prompt" else "sampling_params":
                1 if field == "prompt" else {"max_new_tokens": 1}}
        if len(batch) <= MAX_PROMPTS:
            work = run(setup, build, body)
            assert work.prompts == batch and work.batch
        else:
            with pytest.raises(Rejected) as err:
                run(setup, build, body)
            assert (err.value.status, err.value.reason, err.value.param) == (413, "too_many_prompts", field)
            assert f"holds {len(batch)} prompts" in err.value.message


@PROPERTY
@given(value=st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.dictionaries(st.text(), st.integers()),
                       st.just([]), st.lists(st.booleans(), min_size=1), st.lists(st.floats(), min_size=1),
                       st.just([[1, 2], "mixed"]), st.just([[]])))
def test_a_malformed_prompt_is_a_400_naming_the_field(setup, value):
    with pytest.raises(BadRequest) as err:
        run(setup, completion_work, {"prompt": value})
    assert err.value.status == 400 and err.value.param == "prompt"


def test_too_many_prompts_is_413_before_any_other_check(setup):
    # Each of the nine prompts is also over the context: the count is what the client hears about.
    with pytest.raises(Rejected) as err:
        run(setup, completion_work, {"prompt": [[1] * (CONTEXT + 5)] * (MAX_PROMPTS + 1)})
    assert (err.value.status, err.value.reason) == (413, "too_many_prompts")


def test_size_is_checked_before_the_context(setup):
    # 8 prompts of 400 tokens asking 400 more: 3200 tokens of work (> 3000, 413), one also over the context.
    batch = [[1] * 400] * 7 + [[1] * (CONTEXT + 1)]
    with pytest.raises(Rejected) as err:
        run(setup, completion_work, {"prompt": batch, "max_tokens": 400})
    assert (err.value.status, err.value.reason) == (413, "too_many_tokens")
    with pytest.raises(BadRequest) as err:  # alone, the long one is over the context: 400
        run(setup, completion_work, {"prompt": batch[-1], "max_tokens": 4})
    assert err.value.status == 400 and "context is 512" in err.value.message


def test_a_text_far_over_the_context_is_refused_before_it_is_tokenised(setup, tokenizer):
    text = "tokenise me " * ((2 << 20) // 12)  # 2 MiB
    calls = []
    ctx, limits = setup
    spy = ParseContext(_Counting(tokenizer, calls), VOCAB, MAX_PROMPTS, context_len=CONTEXT,
                       max_queued_tokens=limits.max_queued_tokens, max_token_bytes=ctx.max_token_bytes)
    t0 = time.perf_counter()
    for build, body in ((completion_work, {"prompt": text}), (generate_work, {"text": text})):
        with pytest.raises(BadRequest) as err:
            prepare(json.dumps(body).encode(), build, spy, limits)
        assert err.value.status == 400 and "bytes" in err.value.message and "context is 512" in err.value.message
    assert calls == [] and time.perf_counter() - t0 < 2.0  # no tokenising at all (it takes seconds)


def test_a_text_that_fits_is_never_refused_by_the_byte_check(setup, tokenizer):
    # The longest tokens, back to back: the fewest tokens per byte the vocabulary allows.
    longest = max(tokenizer.get_vocab(), key=len)
    text = tokenizer.convert_tokens_to_string([longest]) * 30
    work = run(setup, completion_work, {"prompt": text, "max_tokens": 1})
    assert 0 < len(work.prompts[0]) < CONTEXT


def test_only_byte_level_tokenizers_get_the_byte_precheck(tokenizer):
    from tokenizers import normalizers, pre_tokenizers

    assert max_token_bytes(tokenizer) == max(len(t.encode()) for t in tokenizer.get_vocab())
    splitting = _clone(tokenizer)
    splitting.backend_tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()  # drops whitespace: no bound
    assert max_token_bytes(splitting) is None
    stripping = _clone(tokenizer)
    stripping.backend_tokenizer.normalizer = normalizers.StripAccents()
    assert max_token_bytes(stripping) is None


@pytest.mark.parametrize("stop", [{"a": 1}, 7, [1, 2], ["ok", None]])
def test_generate_and_completions_refuse_a_stop_that_is_no_string_list(setup, stop):
    with pytest.raises(BadRequest) as err:
        run(setup, generate_work, {"text": "hi", "sampling_params": {"stop": stop}})
    assert err.value.param == "sampling_params" and "stop must be a string or a list of strings" in err.value.message
    with pytest.raises(BadRequest) as err:
        run(setup, completion_work, {"prompt": "hi", "stop": stop})
    assert err.value.param == "stop"


class _Counting:
    """The real tokenizer, counting its encode calls."""

    def __init__(self, tokenizer, calls):
        self._tok, self._calls = tokenizer, calls

    def __call__(self, *args, **kwargs):
        self._calls.append(1)
        return self._tok(*args, **kwargs)


def _clone(tokenizer):
    import copy

    return copy.deepcopy(tokenizer)
