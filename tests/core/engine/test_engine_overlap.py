"""Overlapped steps (EngineConfig.overlap): step n+1 is scheduled and queued before step n's tokens are
read, its decode rows reading them on the device. The tokens are the plain loop's, whatever happens:
chunked prompts beside decodes, decode graphs, a stop token one step before the row in flight, aborts,
preemption."""

from __future__ import annotations

import pytest
from engine_helpers import prompts_of_lengths, tiny_nemotron_h
from test_engine_decode_graphs import ReplayStandIn

from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_nemotron_h(tmp_path_factory.mktemp("overlap") / "ckpt")


def _engine(folder, overlap, **settings):
    settings = {"max_running_requests": 3, "chunked_prefill_size": 8, "cpu_compile": False, **settings}
    return Engine(EngineConfig(str(folder), device="cpu", overlap=overlap, **{k: v for k, v in settings.items()
                                                                         if k != "graph_factory"}),
                  log=lambda m: None, graph_factory=settings.get("graph_factory"))


PROMPTS = prompts_of_lengths([3, 21, 9, 30, 5, 14], 400, seed=7)  # 6 requests on 3 slots, chunks of 8
PARAMS = [SamplingParams(max_new_tokens=n, temperature=0, ignore_eos=True) for n in (7, 3, 11, 5, 9, 1)]


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "decode graphs"])
def test_overlapped_steps_give_the_plain_loops_tokens(folder, graphs):
    extra = {"cuda_graphs": True, "graph_factory": ReplayStandIn} if graphs else {}
    plain = _engine(folder, False, **extra).generate(PROMPTS, PARAMS)
    engine = _engine(folder, True, **extra)
    filled = []
    if graphs:  # the graphs' step buffer takes the device's tokens for the FUTURE placeholders
        run = engine.decode_graphs.run
        engine.decode_graphs.run = lambda *a, future=None, **kw: filled.append(future is not None) or run(
            *a, future=future, **kw)
    else:
        fill = engine.runner._fill_future
        engine.runner._fill_future = lambda batch, step: filled.append(
            any(r.output_ids and r.output_ids[-1] == -1 for r in step.requests)) or fill(batch, step)
    first = engine.add_request(PROMPTS[0], PARAMS[0])
    assert engine.step() == [] and engine.has_unfinished()  # its token is read with the next step
    assert engine.step()[0].request_id == first
    while engine.has_unfinished():
        engine.step()
    assert engine.overlap and engine.generate(PROMPTS, PARAMS) == plain
    assert any(filled)
    engine.check_pools()
    stats = engine.stats()
    assert stats["generated_tokens_total"] == 7 + sum(len(t) for t in plain)  # no wasted row counted as output
    assert stats["kv_tokens_used"] == 0 and stats["state_slots_used"] == 0


def test_a_stop_token_ends_the_request_and_its_row_in_flight_is_dropped(folder):
    plain_engine = _engine(folder, False)
    free = plain_engine.generate(PROMPTS[:3], PARAMS[0])
    stop = free[0][2]  # the third token of the first request: it stops there, one step before the row in flight
    params = SamplingParams(max_new_tokens=7, temperature=0, ignore_eos=True, stop_token_ids=(stop,))
    expected = plain_engine.generate(PROMPTS[:3], params)
    assert expected[0] == free[0][:3]
    engine = _engine(folder, True)
    assert engine.generate(PROMPTS[:3], params) == expected
    engine.check_pools()


def test_an_abort_while_a_step_is_in_flight_frees_everything(folder):
    engine = _engine(folder, True)
    greedy = SamplingParams(max_new_tokens=40, temperature=0, ignore_eos=True)
    a = engine.add_request(PROMPTS[1], greedy)
    b = engine.add_request(PROMPTS[0], greedy)
    for _ in range(6):
        engine.step()
    assert engine.abort(a)
    outs = {}
    while engine.has_unfinished():
        for out in engine.step():
            outs.setdefault(out.request_id, []).append(out)
    assert outs[a][-1].finish_reason == "abort" and outs[b][-1].completion_tokens == 40
    engine.check_pools()
    assert engine.stats()["kv_tokens_used"] == 0 and engine.stats()["state_slots_used"] == 0


def test_preemption_with_steps_in_flight_gives_the_plain_tokens(folder):
    tight = {"page_size": 4, "max_total_tokens": 64}  # 16 pages for 3 running requests: they preempt
    params = [SamplingParams(max_new_tokens=16, temperature=0, ignore_eos=True)] * 4
    prompts = PROMPTS[:4]
    plain = _engine(folder, False, **tight)
    expected = plain.generate(prompts, params)
    assert plain.stats()["preemptions_total"] > 0
    engine = _engine(folder, True, **tight)
    assert engine.generate(prompts, params) == expected
    assert engine.stats()["preemptions_total"] > 0
    engine.check_pools()


def test_a_lone_request_filling_the_pool_keeps_its_last_token(folder):
    """The pool runs out while the request's last token is on the device: it ends with that token, as in the plain loop."""
    tight = {"page_size": 4, "max_total_tokens": 32, "max_running_requests": 1}
    params = SamplingParams(max_new_tokens=100, temperature=0, ignore_eos=True)
    expected = _engine(folder, False, **tight).generate([PROMPTS[2]], params)
    engine = _engine(folder, True, **tight)
    rid = engine.add_request(PROMPTS[2], params)
    outs = []
    while engine.has_unfinished():
        outs += [o for o in engine.step() if o.request_id == rid]
    assert [t for o in outs for t in o.token_ids] == expected[0] and len(expected[0]) == 32 - 9 + 1
    assert outs[-1].finish_reason == "length" and "is full" in outs[-1].error
    engine.check_pools()
