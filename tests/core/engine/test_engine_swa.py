"""The SWA pool end to end: a tiny Gemma 3 (text) and gpt-oss, whose sliding layers keep only their
window, give transformers' greedy ids, batched and chunked; the window's old pages are freed as it
moves, a request never holds more SWA pages than its window needs, and every pool ends empty."""

import pytest

from bringup.core.engine.config import EngineConfig

from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams

from engine_helpers import hf_greedy, prompts_of_lengths, tiny_sliding

pytestmark = pytest.mark.slow  # starts a real engine

LENGTHS = [3, 21, 9, 40]
NEW = 6
WINDOW = 8
GREEDY = SamplingParams(max_new_tokens=NEW, temperature=0, ignore_eos=True)


@pytest.fixture(scope="module", params=["gemma3_text", "gpt_oss"])
def checkpoint(request, tmp_path_factory):
    folder = tiny_sliding(tmp_path_factory.mktemp(request.param), request.param, window=WINDOW)
    prompts = prompts_of_lengths(LENGTHS, 400, seed=3)
    return folder, prompts, hf_greedy(folder, prompts, NEW)


def test_swa_pool_keeps_the_window_and_matches_transformers(checkpoint):
    folder, prompts, expected = checkpoint
    engine = Engine(EngineConfig(str(folder), device="cpu", page_size=4, chunked_prefill_size=16),
                    log=lambda line: None)
    swa = engine.swa_pool
    assert swa is not None and swa.window == WINDOW
    assert set(swa.layer_ids) == set(engine.layer_map.sliding_attention_layers)
    assert not set(swa.layer_ids) & set(engine.kv_pool.layer_ids)  # full layers only in the KV pool
    ids = [engine.add_request(p, GREEDY, detokenize=False) for p in prompts]
    got = {rid: [] for rid in ids}
    most = 0
    while engine.has_unfinished():
        for out in engine.step():
            got[out.request_id] += out.token_ids
        for req in engine.scheduler.running:  # never more than the window's pages plus one chunk's
            held = sum(p is not None for p in req.swa_pages)
            assert held <= swa.pages_at_most(16), (req, req.swa_pages)
            most = max(most, held)
        engine.check_pools()
    assert [got[r] for r in ids] == expected
    stats = engine.stats()
    assert stats["swa_evicted_tokens_total"] > 0  # the 40-token prompt slid past the window
    assert stats["swa_tokens_used"] == stats["kv_tokens_used"] == stats["state_slots_used"] == 0
    assert engine.server_info()["allocated"]["swa_tokens"] == swa.capacity_tokens
    assert engine.plan.swa_window == WINDOW and engine.plan.swa_tokens > 0


def test_plan_counts_sliding_layers_in_the_swa_pool(checkpoint):
    from bringup.core.families import build_layer_map
    from bringup.core.planner import plan_memory
    import json

    folder = checkpoint[0]
    layer_map = build_layer_map(json.loads((folder / "config.json").read_text()))
    plan = plan_memory(layer_map, device_memory=8 << 30, target="embedded", device="cpu", weights_bytes=1 << 20,
                       page_size=4, context=1024, max_running_requests=4)
    sliding = len(layer_map.sliding_attention_layers)
    full = len(layer_map.kv_layers) - sliding
    assert plan.kv_bytes_per_token * sliding == plan.swa_bytes_per_token * full  # same heads, split by kind
    assert plan.swa_tokens == 4 * (2 + -(-(WINDOW - 1) // 4)) * 4 + 1024  # window pages per request + a chunk
    assert "swa_pool" in [seg.name for seg in plan.breakdown]
