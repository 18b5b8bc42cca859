"""The engine loop thread: outputs reach their streams, aborts free pools, a failing step is contained."""

from __future__ import annotations

import asyncio

import pytest

from server_helpers import tiny_checkpoint


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine

    return Engine(EngineConfig(str(tiny_checkpoint(tmp_path_factory.mktemp("async_models"))), device="cpu",
                               max_running_requests=4), log=lambda message: None)


def run_with_loop(engine, scenario):
    from bringup.core.serve.async_engine import AsyncEngine
    from bringup.core.serve.metrics import EngineMetrics

    aengine = AsyncEngine(engine, EngineMetrics("tiny"))
    aengine.start()
    try:
        return asyncio.run(asyncio.wait_for(scenario(aengine), timeout=120))
    finally:
        aengine.stop()
        assert not aengine.alive


async def drain(stream):
    outs = []
    while not outs or not outs[-1].finished:
        outs.append(await stream.get())
    return outs


def greedy(n: int):
    from bringup.core.engine.sampling import SamplingParams

    return SamplingParams(max_new_tokens=n, temperature=0.0, ignore_eos=True)


def test_streams_get_all_their_tokens_and_metrics_count_them(engine):
    async def scenario(ae):
        streams = [await ae.submit([5, 6, 7 + i], greedy(3 + i)) for i in range(6)]  # 6 on 4 slots
        return [await drain(s) for s in streams], ae.metrics.snapshot()

    results, snap = run_with_loop(engine, scenario)
    assert [sum(len(o.token_ids) for o in outs) for outs in results] == [3 + i for i in range(6)]
    assert all(outs[-1].finish_reason == "length" for outs in results)
    assert snap["generation_tokens_total"] == sum(3 + i for i in range(6))
    assert snap["num_requests_total"] == 6
    engine.check_pools()
    assert engine.stats()["state_slots_used"] == 0


def test_abort_ends_the_stream_and_frees_the_pools(engine):
    async def scenario(ae):
        stream = await ae.submit([5, 6, 7], greedy(2000))
        first = await stream.get()
        ae.abort(stream.request_id)
        ae.abort(stream.request_id)  # twice is harmless
        rest = await drain(stream)
        stats = await ae.call(engine.stats)
        return first, rest, stats

    first, rest, stats = run_with_loop(engine, scenario)
    assert first.token_ids and rest[-1].finish_reason == "abort"
    assert stats["kv_tokens_used"] == 0 and stats["state_slots_used"] == 0


def test_a_rejected_request_raises_to_its_caller_only(engine):
    from bringup.core.engine.request import RequestRejected

    async def scenario(ae):
        ok = await ae.submit([5, 6], greedy(4))
        with pytest.raises(RequestRejected):
            await ae.submit([5] * 100_000, greedy(1))  # longer than the context
        return await drain(ok)

    outs = run_with_loop(engine, scenario)
    assert sum(len(o.token_ids) for o in outs) == 4


def test_a_failing_step_ends_its_requests_and_the_loop_goes_on(engine, monkeypatch):
    from bringup.core.serve.async_engine import EngineFailed

    real_step = engine.step
    failed = []

    def step_that_fails_once():
        stats = engine.stats()
        if not failed and stats["num_running"] + stats["num_queued"] >= 2:  # once both are in
            failed.append(True)
            raise RuntimeError("simulated kernel fault")
        return real_step()

    monkeypatch.setattr(engine, "step", step_that_fails_once)

    async def scenario(ae):
        doomed = [await ae.submit([5, 6, 7], greedy(50)) for _ in range(2)]
        errors = []
        for s in doomed:
            with pytest.raises(EngineFailed) as info:
                await drain(s)
            errors.append(str(info.value))
        after = await drain(await ae.submit([8, 9], greedy(3)))
        return errors, after, ae.error

    errors, after, last_error = run_with_loop(engine, scenario)
    assert all("simulated kernel fault" in e for e in errors)
    assert "simulated kernel fault" in last_error
    assert sum(len(o.token_ids) for o in after) == 3
    engine.check_pools()


def test_many_prompts_enqueue_in_one_command_and_abort_at_once(engine, monkeypatch):
    # One prompt per engine step made a 200-prompt request 4x slower than 200 requests. Each add
    # records the engine's step count: one command means every prompt went in between the same
    # two steps (the loop may step freely before the next command arrives, so that is not counted).
    steps_at_add = []
    add_request = engine.add_request

    def recording_add(*args, **kwargs):
        steps_at_add.append(engine.stats()["steps_total"])
        return add_request(*args, **kwargs)

    monkeypatch.setattr(engine, "add_request", recording_add)

    async def scenario(ae):
        streams = await ae.submit_many([[5, 6, 7 + i] for i in range(40)], [greedy(500)] * 40)
        queued = await ae.call(engine.stats)
        ae.abort_many([s.request_id for s in streams], "the client left")
        ends = [(await drain(s))[-1] for s in streams]
        return queued, ends, await ae.call(engine.stats)

    queued, ends, after = run_with_loop(engine, scenario)
    assert len(steps_at_add) == 40 and len(set(steps_at_add)) == 1, steps_at_add
    assert queued["num_running"] + queued["num_queued"] == 40
    assert all(e.finish_reason == "abort" and e.error == "the client left" for e in ends)
    assert after["num_queued"] == 0 and after["state_slots_used"] == 0
    assert after["generated_tokens_total"] - queued["generated_tokens_total"] < 40 * 10  # not 40 x 500


def test_a_refused_prompt_in_a_batch_adds_none_of_them(engine):
    from bringup.core.engine.request import RequestRejected

    async def scenario(ae):
        with pytest.raises(RequestRejected):
            await ae.submit_many([[5, 6], [5] * 100_000], [greedy(4)] * 2)
        return await ae.call(engine.stats), ae.num_unfinished

    stats, unfinished = run_with_loop(engine, scenario)
    assert unfinished == 0 and stats["num_queued"] == 0 and stats["num_running"] == 0


def test_a_steps_outputs_reach_the_event_loop_in_one_call_and_are_decoded_there(engine, monkeypatch):
    """The loop thread wakes the event loop once per step, not once per request, and leaves the text
    to the event loop (the engine decodes only requests with stop strings): the text is the same."""
    import threading

    from bringup.core.serve import async_engine

    calls, threads = [], set()
    real = async_engine._put_all

    def counted(items):
        calls.append(len(items))
        threads.add(threading.current_thread().name)
        real(items)

    monkeypatch.setattr(async_engine, "_put_all", counted)
    prompts = [[5, 6, 7 + i] for i in range(4)]

    async def scenario(ae):
        streams = await ae.submit_many(prompts, [greedy(6)] * 4)
        return [await drain(s) for s in streams]

    results = run_with_loop(engine, scenario)
    assert max(calls) == 4 and len(calls) < sum(len(outs) for outs in results)  # four streams, one call a step
    assert threads == {threading.main_thread().name}  # decoded on the event loop, not the engine's thread
    ids = [[t for o in outs for t in o.token_ids] for outs in results]
    texts = ["".join(o.text for o in outs) for outs in results]
    assert texts == [engine.tokenizer.decode(i, skip_special_tokens=True, clean_up_tokenization_spaces=False)
                     for i in ids]


def test_a_submit_given_up_while_queued_adds_nothing_and_the_loop_goes_on(engine):
    """A client that leaves while its submit waits for the loop cancels the command's future. The
    loop once ran it anyway and then died answering a cancelled future: the pools never drained."""
    import threading

    async def scenario(ae):
        inside, release = threading.Event(), threading.Event()
        blocker = asyncio.ensure_future(ae.call(lambda: (inside.set(), release.wait(60))))
        await asyncio.to_thread(inside.wait, 60)  # the loop thread is busy: the next command waits
        submit = asyncio.ensure_future(ae.submit([5, 6, 7], greedy(50)))
        await asyncio.sleep(0)  # the submit has queued its command
        submit.cancel()  # what ClientWatch.race does when the client goes
        with pytest.raises(asyncio.CancelledError):
            await submit
        release.set()
        await blocker
        after = await asyncio.wait_for(ae.call(engine.stats), 30)  # the loop still answers (it hung here)
        served = await drain(await ae.submit([8, 9], greedy(3)))
        return after, served, ae.num_unfinished, ae.alive

    after, served, unfinished, alive = run_with_loop(engine, scenario)
    assert alive and unfinished == 0
    assert after["num_running"] == after["num_queued"] == 0 and after["kv_tokens_used"] == 0
    assert after["state_slots_used"] == 0
    assert sum(len(o.token_ids) for o in served) == 3
    engine.check_pools()
