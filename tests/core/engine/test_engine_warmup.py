"""The start-up warm-up (core/engine/warmup.py): its plan stays inside the pools, its steps cover a
full prompt chunk, a full mixed chunk (a resumed prompt, decodes, new prompts) and a tail step not a
multiple of 16, and it leaves nothing behind: free pools, unchanged counters, the same greedy tokens
as an engine that did not warm up. On the CPU it is off by default."""

from __future__ import annotations

import pytest

from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams
from bringup.core.engine.warmup import plan_warmup

from engine_helpers import prompts_of_lengths, tiny_nemotron_h


def test_plan_fills_two_chunks_and_a_tail_within_the_pools():
    plan = plan_warmup(chunk=32768, max_context=4096, max_running=256, kv_tokens=1_000_000)
    assert sum(plan.waves[0]) >= 2 * 32768 + 32768 // 4
    # Then single prompts up to a quarter chunk (within the context), each length and one 3 longer.
    assert plan.waves[1:] == [[n] for k in range(4, 12) for n in (2**k, 2**k + 3)]
    assert max(plan.prompt_lens) <= 4096 - plan.new_tokens - 1
    assert len(plan.prompt_lens) <= 256
    # Few slots: longer prompts, still within the context.
    few = plan_warmup(chunk=4096, max_context=100_000, max_running=2, kv_tokens=1_000_000)
    assert len(few.waves[0]) == 2 and sum(few.waves[0]) >= 2 * 4096
    # A small KV pool: at most half of it.
    small = plan_warmup(chunk=32768, max_context=4096, max_running=256, kv_tokens=20_000)
    assert all(sum(n + small.new_tokens + 16 for n in wave) <= 10_000 for wave in small.waves)
    # Not even one prompt fits: no warm-up.
    assert plan_warmup(chunk=64, max_context=3, max_running=4, kv_tokens=1000) is None
    # No chunking: the nominal step size.
    assert sum(plan_warmup(chunk=None, max_context=None, max_running=64, kv_tokens=None).waves[0]) >= 2 * 8192


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_nemotron_h(tmp_path_factory.mktemp("warm") / "tiny")


def _engine(tiny, warmup, **kw):
    return Engine(EngineConfig(tiny, device="cpu", dtype="float32", max_running_requests=16, chunked_prefill_size=64,
                               context_length=512, warmup=warmup, **kw), log=lambda m: None)


def test_warmup_covers_real_step_shapes_and_leaves_no_trace(tiny):
    warm = _engine(tiny, True)
    report = warm.warmup_report
    assert report is not None and report.seconds > 0
    steps = report.steps
    full_pure = [s for s in steps if s["tokens"] == 64 and s["decodes"] == 0 and s["prompt_tokens"] == 64]
    # (a mixed step carries its decodes beside a full chunk of prompt tokens: the budget is prompt tokens)
    full_mixed = [s for s in steps if s["prompt_tokens"] == 64 and s["tokens"] == 64 + s["decodes"]
                  and s["decodes"] > 0 and s["resumed"] > 0 and s["prompt_tokens"] > s["resumed"]]
    assert full_pure and full_mixed, steps
    assert any(s["prompt_tokens"] and s["tokens"] % 16 for s in steps), steps
    assert any(not s["prompt_tokens"] for s in steps), steps  # decode-only steps too
    assert {16, 19} <= {s["tokens"] for s in steps}, steps  # the ladder's single prompts
    assert not warm.has_unfinished()
    warm.check_pools()
    stats = warm.stats()
    assert stats["kv_pages_used"] == 0 and stats["state_slots_used"] == 0
    assert stats["requests_total"] == 0 and stats["steps_total"] == 0 and stats["prompt_tokens_total"] == 0
    assert warm.server_info()["warmup_seconds"] == pytest.approx(report.seconds, abs=1e-3)

    cold = _engine(tiny, None)  # the CPU default: no warm-up
    assert cold.warmup_report is None and cold.server_info()["warmup_seconds"] is None
    prompts = prompts_of_lengths([70, 5, 33], cold.vocab_size, seed=3)
    params = SamplingParams(max_new_tokens=6, temperature=0.0, ignore_eos=True)
    assert warm.generate(prompts, params) == cold.generate(prompts, params)


def test_warmup_with_one_running_request(tiny):
    engine = Engine(EngineConfig(tiny, device="cpu", dtype="float32", max_running_requests=1, chunked_prefill_size=64,
                                 context_length=512, warmup=True), log=lambda m: None)
    assert engine.warmup_report is not None and not engine.has_unfinished()
    engine.check_pools()


def test_env_sets_the_default_and_an_explicit_choice_wins(tiny, monkeypatch):
    monkeypatch.setenv("BRINGUP_WARMUP", "1")
    assert _engine(tiny, None).warmup_report is not None  # on the CPU, where it is off by default
    assert _engine(tiny, False).warmup_report is None  # e.g. bench/nano_full.py --no-warmup
    monkeypatch.setenv("BRINGUP_WARMUP", "0")
    assert _engine(tiny, None).warmup_report is None
    assert _engine(tiny, True).warmup_report is not None
