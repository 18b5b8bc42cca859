"""`bringup serve` on a tiny Gemma 3 (text): concurrent greedy requests give transformers' ids,
/metrics shows the SWA pool (SGLang's swa_* names), and every pool (KV, SWA, state) ends empty."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from engine_helpers import hf_greedy, prompts_of_lengths, tiny_sliding
from server_helpers import start_server, wait_idle

from bringup.core.client.metrics_scrape import parse_prometheus

pytestmark = pytest.mark.slow  # starts a real server

NEW = 5


def test_serve_gemma3_with_an_swa_pool(tmp_path):
    folder = tiny_sliding(tmp_path / "gemma3", "gemma3_text", window=8)
    prompts = prompts_of_lengths([30, 4, 17], 400, seed=11)
    expected = hf_greedy(folder, prompts, NEW)
    srv = start_server(folder, "--max-running-requests", "4", "--chunked-prefill-size", "16")
    try:
        with httpx.Client(base_url=srv.base_url, headers=srv.headers(), timeout=60) as client:
            def generate(ids):
                r = client.post("/generate", json={"input_ids": ids, "sampling_params": {
                    "max_new_tokens": NEW, "temperature": 0, "ignore_eos": True}})
                assert r.status_code == 200, r.text
                return r.json()["output_ids"]

            with ThreadPoolExecutor(len(prompts)) as pool:  # concurrent: batched in the engine
                assert list(pool.map(generate, prompts)) == expected
            info = wait_idle(client)
            assert info["pools_check"] == "ok" and info["swa_layers"] == [0, 1] and info["sliding_window"] == 8
            stats = info["stats"]
            assert stats["kv_tokens_used"] == stats["swa_tokens_used"] == stats["state_slots_used"] == 0
            metrics = parse_prometheus(client.get("/metrics").text)
            assert metrics["bringup:max_total_num_tokens_swa"] == info["allocated"]["swa_tokens"] > 0
            assert metrics["bringup:swa_used_tokens"] == 0 and metrics["bringup:swa_token_usage"] == 0
            assert metrics["bringup:swa_evicted_tokens_total"] > 0  # the 30-token prompt slid past the window
    finally:
        srv.process.stop()
    assert "SWA KV Cache is allocated. window: 8" in srv.log
