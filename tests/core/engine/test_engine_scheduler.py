"""The scheduler alone (no model): admission by both pools, chunked prefill, preemption, refusal."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.core.engine.model_runner import build_batch
from bringup.core.engine.pools import KVPool, StatePool
from bringup.core.engine.request import Request, RequestRejected, Status
from bringup.core.engine.sampling import SamplingParams
from bringup.core.engine.scheduler import Scheduler

PAGE = 4


def make(num_pages=16, num_slots=4, max_running=8, chunk=None, max_context=None, mixed=None):
    kv = KVPool(num_pages, PAGE, [1, 3], num_kv_heads=1, head_dim=4, dtype="float32", device="cpu")
    state = StatePool(num_slots, [0, 2], (6, 3), (1, 2, 2), device="cpu")
    return Scheduler(kv, state, max_running_requests=max_running, chunked_prefill_size=chunk,
                     mixed_prefill_size=mixed, max_context=max_context)


_n = iter(range(10**6))


def req(prompt_len, max_new=4, rid=None):
    n = next(_n)
    return Request(rid or f"r{n}", list(range(1, prompt_len + 1)), SamplingParams(max_new_tokens=max_new), arrival=n)


def run_step(s: Scheduler):
    """What the engine does around the model: schedule, build the batch (as the runner does), advance, append tokens."""
    return run_scheduled(s, s.schedule())


def run_scheduled(s: Scheduler, step):
    if step.requests:
        batch = build_batch(step, s.kv_pool, s.state_pool, "cpu")
        assert batch.num_tokens == step.num_tokens
        samples = step.samples()
        s.advance(step)
        for r, sampled in zip(step.requests, samples):
            if sampled:
                r.output_ids.append(7)
                if len(r.output_ids) >= r.params.max_new_tokens:
                    s.finish(r, "length")
    s.check()
    return step


def drain(s: Scheduler, limit=500):
    steps = []
    while s.has_work():
        steps.append(run_step(s))
        assert len(steps) < limit, "scheduler made no progress"
    return steps


def test_state_slots_limit_admission():
    s = make(num_slots=2)
    rs = [req(3) for _ in range(4)]
    for r in rs:
        s.add(r)
    step = run_step(s)
    assert [r.id for r in step.requests] == [rs[0].id, rs[1].id]
    assert rs[2].status is Status.WAITING and len(s.waiting) == 2
    assert s.state_pool.num_free_slots == 0
    drain(s)
    assert all(len(r.output_ids) == 4 for r in rs)
    assert s.kv_pool.num_used_pages == 0 and s.state_pool.num_used_slots == 0


def test_kv_pages_limit_admission():
    s = make(num_pages=6, num_slots=8)  # 24 tokens
    a, b = req(10), req(10)  # each needs 3 pages for prompt + first token; watermark 1 page
    s.add(a)
    s.add(b)
    step = run_step(s)
    assert [r.id for r in step.requests] == [a.id]  # b would leave less than the watermark
    assert b.status is Status.WAITING
    drain(s)
    assert b.output_ids == [7] * 4


def test_max_running_limits_admission():
    s = make(num_slots=8, max_running=1)
    rs = [req(2) for _ in range(3)]
    for r in rs:
        s.add(r)
    assert len(run_step(s).requests) == 1
    drain(s)


def test_chunked_prefill_carries_state_slot_between_chunks():
    s = make(num_pages=32, chunk=5)
    long, short = req(12, max_new=2), req(2, max_new=2)
    s.add(long)
    s.add(short)
    step = run_step(s)
    assert step.num_new_tokens == [5] and long.num_computed == 5 and not long.output_ids
    slot = long.state_slot
    batch_steps = []
    step = s.schedule()
    batch = build_batch(step, s.kv_pool, s.state_pool, "cpu")
    batch_steps.append(batch)
    assert batch.has_initial_state.tolist()[0] is True  # second chunk continues the state
    assert batch.positions.tolist()[:5] == [5, 6, 7, 8, 9]
    assert int(batch.state_slots[0]) == slot
    s.advance(step)
    # the rest of the budget (5 - 5 = 0) leaves the short one waiting; next step has chunk 2 + short
    step = s.schedule()
    assert step.num_new_tokens == [2, 2] and step.samples() == [True, True]
    s.advance(step)
    for r in step.requests:
        r.output_ids.append(7)
    drain(s)
    assert long.state_slot is None and s.state_pool.num_used_slots == 0


def test_mixed_prefill_and_decode_step():
    s = make(num_pages=32, chunk=64)
    a = req(3, max_new=5)
    s.add(a)
    run_step(s)  # a prefilled, one token out
    b = req(6)
    s.add(b)
    step = run_step(s)
    assert [(r.id, n) for r, n in zip(step.requests, step.num_new_tokens)] == [(a.id, 1), (b.id, 6)]
    batch_lens = [r.num_computed for r in step.requests]
    assert batch_lens == [4, 6]


def test_block_table_and_slot_mapping():
    s = make(num_pages=8)
    r = req(6)
    s.add(r)
    step = s.schedule()
    batch = build_batch(step, s.kv_pool, s.state_pool, "cpu")
    pages = r.pages
    assert len(pages) == 2
    want = [pages[p // PAGE] * PAGE + p % PAGE for p in range(6)]
    assert batch.slot_mapping.tolist() == want
    assert batch.block_tables[0, :2].tolist() == pages
    assert batch.context_lens.tolist() == [6] and batch.has_initial_state.tolist() == [False]


def test_preemption_frees_newest_and_recomputes_it():
    s = make(num_pages=5, num_slots=4, chunk=None)  # 20 tokens of KV
    old, new = req(7, max_new=8), req(3, max_new=8)
    s.add(old)
    run_step(s)
    s.add(new)
    steps = drain(s)
    assert s.num_preemptions >= 1
    assert new.num_preemptions >= 1 and old.num_preemptions == 0
    assert old.output_ids == [7] * 8 and new.output_ids == [7] * 8
    preempted = [r.id for st in steps for r in st.preempted]
    assert preempted and set(preempted) == {new.id}


def test_refuses_prompt_that_can_never_fit():
    s = make(num_pages=4)  # 16 tokens
    with pytest.raises(RequestRejected, match=r"needs 5 KV pages of 4 tokens, but the KV pool holds only 4 pages"):
        s.add(req(16))
    with pytest.raises(RequestRejected, match="the prompt is empty"):
        s.add(req(0))
    s2 = make(max_context=10)
    with pytest.raises(RequestRejected, match="the model's context is 10"):
        s2.add(req(10))
    assert not s.has_work()


def test_lone_request_filling_the_pool_ends_with_length():
    s = make(num_pages=3, num_slots=2)  # 12 tokens
    r = req(8, max_new=100)
    s.add(r)
    drain(s)
    assert r.finish_reason == "length" and "KV pool is full" in r.error
    assert r.num_computed == 12 and len(r.output_ids) == 5  # the 13th token was sampled, never stored
    assert s.kv_pool.num_used_pages == 0


def test_finish_frees_at_once_in_any_state():
    s = make()
    a, b = req(3), req(3)
    s.add(a)
    s.add(b)
    run_step(s)
    s.finish(a, "abort")
    assert a.pages == [] and a.state_slot is None and a not in s.running
    c = req(2)
    s.add(c)
    s.finish(c, "abort")  # still queued
    assert c not in s.waiting
    s.check()
    drain(s)


events = st.lists(st.tuples(st.sampled_from(["add", "add", "step", "step", "step", "abort"]),
                            st.integers(1, 30), st.integers(1, 12)), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None)
@given(events, st.sampled_from([None, 3, 8]), st.integers(4, 12))
def test_random_traffic_keeps_pools_consistent_and_ends_empty(script, chunk, num_pages):
    """Random adds, aborts and steps on a tight pool: after every step each page and slot has
    exactly one owner among the running requests, and once everything ends both pools are empty."""
    s = make(num_pages=num_pages, num_slots=3, max_running=3, chunk=chunk)
    live: list[Request] = []
    for op, a, b in script:
        if op == "add":
            r = req(a, max_new=b)
            try:
                s.add(r)
                live.append(r)
            except RequestRejected:
                assert s.kv_pool.pages_for(a + 1) > num_pages
        elif op == "abort" and live:
            s.finish(live[a % len(live)], "abort")
        else:
            run_step(s)
        live = [r for r in live if not r.is_finished]
        assert len(s.running) <= 3
    drain(s)
    s.check()
    assert s.kv_pool.num_used_pages == 0 and s.state_pool.num_used_slots == 0
    for r in live:
        assert r.is_finished and r.finish_reason == "length"
        if r.error is None:  # not ended by a full pool: it got every token it asked for
            assert len(r.output_ids) == r.params.max_new_tokens


def _one_token_steps(s: Scheduler, tokens_of):
    """Steps as the engine runs them, the model's sampled token chosen per request by tokens_of."""
    while s.has_work():
        step = s.schedule()
        if step.requests:
            s.postprocess(step, [tokens_of(r) if sampled else None for r, sampled in zip(step.requests, step.samples())])
        s.take_ended()


def test_postprocess_owns_finishing():
    """The scheduler ends requests on a stop id, EOS (unless ignored), max_new_tokens and the context."""
    s = make(num_pages=32, max_context=12)
    s.eos_token_ids = frozenset({2})
    stop_id = Request("stop", [5, 6], SamplingParams(max_new_tokens=9, stop_token_ids=(9,)), arrival=0)
    eos = Request("eos", [5, 6], SamplingParams(max_new_tokens=9), arrival=1)
    ignore = Request("ignore", [5, 6], SamplingParams(max_new_tokens=3, ignore_eos=True), arrival=2)
    context = Request("ctx", list(range(3, 12)), SamplingParams(max_new_tokens=9, ignore_eos=True), arrival=3)
    for r in (stop_id, eos, ignore, context):
        s.add(r)
    script = {"stop": [7, 9], "eos": [7, 7, 2], "ignore": [2, 2, 2], "ctx": [4, 4, 4, 4]}
    _one_token_steps(s, lambda r: script[r.id][len(r.output_ids)])
    assert (stop_id.output_ids, stop_id.finish_reason) == ([7, 9], "stop")
    assert (eos.output_ids, eos.finish_reason) == ([7, 7, 2], "stop")
    assert (ignore.output_ids, ignore.finish_reason) == ([2, 2, 2], "length")
    assert (context.num_tokens, context.finish_reason) == (12, "length")
    assert s.totals == {"prompt": 2 + 2 + 2 + 9, "recomputed": 0, "generated": 2 + 3 + 3 + 3}
    s.check()
    assert s.kv_pool.num_used_pages == 0 and s.state_pool.num_used_slots == 0


def test_swa_pages_follow_the_window_and_a_short_pool_preempts():
    """Sliding layers' pages: a request holds only what its window (5 tokens) still reaches; with
    room for fewer windows than requests, the newest is preempted and recomputed; all ends empty."""
    from bringup.core.engine.pools import SWAPool

    kv = KVPool(64, PAGE, [2], num_kv_heads=1, head_dim=4, dtype="float32", device="cpu")
    swa = SWAPool(7, PAGE, [0, 1], 1, 4, window=5, dtype="float32", device="cpu")
    state = StatePool(4, [], (1,), (1,), device="cpu")
    s = Scheduler(kv, state, max_running_requests=4, chunked_prefill_size=8, swa_pool=swa)
    rs = [req(13, max_new=12)] + [req(3, max_new=12) for _ in range(3)]  # short ones admitted together
    for r in rs:
        s.add(r)
    while s.has_work():
        step = s.schedule()
        if step.requests:
            batch = build_batch(step, s.kv_pool, s.state_pool, "cpu", swa)
            assert batch.swa_block_tables.shape[0] == len(step.requests)
            for r, n in zip(step.requests, step.num_new_tokens):
                held = [i for i, p in enumerate(r.swa_pages) if p is not None]
                # Held: from the page of the window's first position to the step's last token.
                assert held == list(range(swa.expired_pages(r.num_computed), swa.pages_for(r.num_computed + n)))
                assert len(held) <= swa.pages_at_most(n)
            samples = step.samples()
            s.advance(step)
            for r, sampled in zip(step.requests, samples):
                if sampled:
                    r.output_ids.append(7)
                    if len(r.output_ids) >= r.params.max_new_tokens:
                        s.finish(r, "length")
        s.check()
    assert all(r.finish_reason == "length" for r in rs)
    assert s.num_preemptions > 0 and s.swa_evicted_pages > 0
    assert swa.num_used_pages == kv.num_used_pages == 0
    with pytest.raises(RequestRejected, match="SWA pages"):
        Scheduler(kv, state, max_running_requests=4, chunked_prefill_size=64, swa_pool=swa).add(req(40))


def test_a_step_lists_its_requests_in_state_slot_order():
    """A finished request's slot goes to the next one admitted; the step still lists requests by
    slot, so a full decode batch's slots are one ascending run (its states stepped in place)."""
    s = make(num_pages=32, num_slots=4, max_running=4)
    first, *others = [req(3, max_new=n) for n in (1, 6, 6, 6)]
    for r in (first, *others):
        s.add(r)
    run_step(s)  # the four prompts; the first request ends with its one token
    assert first.is_finished
    late = req(3, max_new=6)
    s.add(late)
    step = s.schedule()
    assert step.requests[1:] == others and step.requests[0] is late  # late took the lowest slot, first's
    slots = [r.state_slot for r in step.requests]
    assert slots == sorted(slots) == list(range(4))
    assert step.num_new_tokens == [r.num_uncomputed for r in step.requests]  # each count moved with its request


def _decoding(s: Scheduler) -> list:
    return [r for r in s.running if r.num_computed >= len(r.prompt_ids) and r.num_uncomputed == 1]


def _prompt_tokens(step) -> int:
    return sum(n for _, n in step.prefill())


def test_decode_rows_run_every_step_while_a_long_prompt_is_chunked():
    """Mixed chunked prefill: decodes are never held back by a prompt, and prompt tokens keep to the budget
    (a budget smaller than the decode rows still lets every row decode)."""
    s = make(num_pages=64, num_slots=8, chunk=3)
    decoders = [req(2, max_new=12) for _ in range(4)]
    for r in decoders:
        s.add(r)
    while any(r.num_computed < len(r.prompt_ids) for r in decoders):
        run_step(s)
    long = req(20, max_new=2)
    s.add(long)
    chunked = 0
    while long.num_computed < len(long.prompt_ids):
        decoding = {r.id for r in _decoding(s)}
        step = run_step(s)
        scheduled = {r.id for r in step.requests}
        assert decoding <= scheduled  # every decoding request got its token this step
        assert _prompt_tokens(step) <= 3
        chunked += 1
    assert chunked == 7  # 20 prompt tokens in chunks of 3: the decodes took none of the budget
    drain(s)
    assert all(len(r.output_ids) == 12 for r in decoders) and long.output_ids == [7, 7]


def test_a_step_beside_decodes_takes_the_mixed_budget_and_a_prompt_only_step_the_whole_chunk():
    s = make(num_pages=64, num_slots=8, chunk=8, mixed=3)
    decoders = [req(2, max_new=4) for _ in range(2)]
    long = req(40, max_new=2)
    for r in decoders:
        s.add(r)
    seen = []  # per step: (requests decoding, prompt tokens), read before the step is recorded
    while s.has_work():
        if len(seen) == 1:
            s.add(long)  # arrives while the two short ones decode
        step = s.schedule()
        prompt = sum(n for _, n in step.prefill())
        seen.append((len(step.requests) - len(step.prefill()), prompt))
        run_scheduled(s, step)
        assert len(seen) < 50, "scheduler made no progress"
    # Their prompts (4 tokens, nobody decoding); 3 decode steps with 3 prompt tokens of the long one each
    # (admitted within the mixed budget); the rest of it alone in whole chunks of 8; its one decode.
    assert seen == [(0, 4), (2, 3), (2, 3), (2, 3), (0, 8), (0, 8), (0, 8), (0, 7), (1, 0)]
    assert all(len(r.output_ids) == 4 for r in decoders) and long.output_ids == [7, 7]
    assert s.kv_pool.num_used_pages == 0 and s.state_pool.num_used_slots == 0


def test_the_mixed_budget_is_at_most_the_chunk_and_defaults_to_it():
    assert make(chunk=4, mixed=16).prompt_budget(with_decodes=True) == 4
    assert make(chunk=4).prompt_budget(with_decodes=True) == 4 == make(chunk=4, mixed=2).prompt_budget(False)
    assert make(chunk=None, mixed=2).prompt_budget(True) == 2  # prompts unchunked, but not beside decodes
    assert make(chunk=None).prompt_budget(True) == float("inf")


def test_a_request_whose_last_token_is_in_flight_does_not_make_the_step_mixed():
    """Overlapped steps: a `finishing` request computes nothing more, so the prompts get the whole chunk;
    one whose token is in flight and that goes on decoding makes the step mixed."""
    s = make(num_pages=64, num_slots=8, chunk=8, mixed=2)
    a = req(2, max_new=1)
    s.add(a)
    first = s.schedule()
    first_samples = first.samples()  # read before the books move
    s.launched(first, first_samples)  # queued on the device: a's one and last token is in flight
    assert a.finishing
    b = req(20, max_new=1)
    s.add(b)
    second = s.schedule()
    assert second.requests == [b] and second.num_new_tokens == [8]
    s = make(num_pages=64, num_slots=8, chunk=8, mixed=2)
    c = req(2, max_new=3)
    s.add(c)
    first = s.schedule()
    s.launched(first, first.samples())  # c's first token in flight: it decodes next step, on the device's token
    d = req(20, max_new=1)
    s.add(d)
    second = s.schedule()
    assert dict(zip(second.requests, second.num_new_tokens)) == {c: 1, d: 2}


def test_preemption_and_abort_mid_chunk_free_everything_and_the_rest_finish():
    s = make(num_pages=8, num_slots=4, chunk=2)  # 32 tokens of KV
    a, b = req(6, max_new=10), req(18, max_new=3)
    s.add(a)
    while not a.output_ids:
        run_step(s)
    s.add(b)
    run_step(s)  # b's first chunk: mid-prompt
    assert 0 < b.num_computed < len(b.prompt_ids)
    while not b.num_preemptions:  # a grows, the pool runs short: b, the newest, goes back mid-prompt
        before = b.num_computed
        run_step(s)
    assert 0 < before < len(b.prompt_ids) and b.num_computed == 0 and b.status is Status.WAITING
    drain(s)  # and is recomputed once a is done
    assert a.output_ids == [7] * 10 and b.output_ids == [7] * 3
    c, d = req(5, max_new=4), req(15, max_new=4)
    s.add(c)
    s.add(d)
    run_step(s)
    assert 0 < d.num_computed < len(d.prompt_ids) or d.status is Status.WAITING
    s.finish(d, "abort")  # aborted mid-chunk: its pages and slot come back at once
    assert d.pages == [] and d.state_slot is None
    s.check()
    drain(s)
    assert c.output_ids == [7] * 4
    assert s.kv_pool.num_used_pages == 0 and s.state_pool.num_used_slots == 0
