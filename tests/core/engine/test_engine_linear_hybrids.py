"""The Engine and `bringup serve` on a tiny random-weight Qwen3-Next (gated DeltaNet + gated
attention + shared-expert MoE), fp32 on CPU: greedy output equals transformers' for requests run
together (chunked prompts, staggered finishes), the state pool is sized and shaped from the
DeltaNet layers as the planner says, and both pools end empty; the server's /metrics shows the
state pool."""

from __future__ import annotations

import os

import httpx
import pytest

from engine_helpers import hf_greedy, prompts_of_lengths, tiny_lfm2, tiny_qwen3_next
from server_helpers import start_server, wait_idle

pytestmark = pytest.mark.slow  # starts a real engine or server

DEVICE = os.environ.get("BRINGUP_TEST_DEVICE", "cpu")
LENGTHS = [3, 21, 9, 40]
NEW = 6


# family -> (builder, state layers, KV layers, conv window shape, recurrent state shape)
FAMILIES = {
    "qwen3_next": (tiny_qwen3_next, (0, 1, 2), (3,), (2 * 2 * 16 + 4 * 16, 3), (4, 16, 16)),
    "lfm2": (tiny_lfm2, (0, 2, 3), (1,), (64, 2), (0,)),
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tiny_qwen3_next(tmp_path_factory.mktemp("qwen3_next"))
    prompts = prompts_of_lengths(LENGTHS, 400, seed=3)
    return folder, prompts, hf_greedy(folder, prompts, NEW)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory, checkpoint):
    if request.param == "qwen3_next":
        return (request.param, *checkpoint)
    folder = FAMILIES[request.param][0](tmp_path_factory.mktemp(request.param))
    prompts = prompts_of_lengths(LENGTHS, 400, seed=3)
    return request.param, folder, prompts, hf_greedy(folder, prompts, NEW)


def test_engine_batched_greedy_equals_transformers_and_pools_end_empty(family):
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.sampling import SamplingParams

    name, folder, prompts, expected = family
    _, state_layers, kv_layers, conv_shape, ssm_shape = FAMILIES[name]
    lines: list[str] = []
    engine = Engine(EngineConfig(str(folder), device=DEVICE, chunked_prefill_size=16), log=lines.append)
    assert engine.generate(prompts, SamplingParams(max_new_tokens=NEW, temperature=0, ignore_eos=True)) == expected
    engine.check_pools()
    stats = engine.stats()
    assert stats["kv_tokens_used"] == 0 and stats["state_slots_used"] == 0 and stats["num_running"] == 0
    # Slots shaped per mixer kind: DeltaNet's conv window over q|k|v and recurrent state [Hv, dk, dv];
    # the short conv's window alone.
    pool = engine.state_pool
    assert pool.layer_ids == state_layers and engine.kv_pool.layer_ids == kv_layers
    assert pool.conv_shape == conv_shape and pool.ssm_shape == ssm_shape
    assert stats["state_slots_total"] == engine.plan.state_slots  # decode graphs add a padding slot beyond
    assert pool.bytes_per_slot == engine.plan.state_bytes_per_request
    assert any(l.startswith("Mamba Cache is allocated. max_mamba_cache_size: ") for l in lines)


def test_serve_concurrent_greedy_and_metrics_show_the_state_pool(checkpoint):
    folder, prompts, expected = checkpoint
    server = start_server(folder, "--max-running-requests", "4")
    try:
        with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=120) as client:
            got = client.post("/generate", json={"input_ids": prompts, "sampling_params": {
                "max_new_tokens": NEW, "temperature": 0, "ignore_eos": True}}).json()
            assert [g["output_ids"] for g in got] == expected
            info = wait_idle(client)
            assert info["stats"]["state_slots_used"] == 0 and info["stats"]["kv_tokens_used"] == 0
            # What the Run tab's live graphs read: the scraper's state-pool figures.
            from bringup.core.client.metrics_scrape import MetricsReader

            sample = MetricsReader().sample(client.get("/metrics").text, t=1.0)
            assert sample.state_total == info["stats"]["state_slots_total"] > 0 and sample.state_used == 0
    finally:
        server.process.stop()
