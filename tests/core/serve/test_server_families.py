"""Issue 10's families through `bringup serve` on CPU in float32: Granite-4.0-H (with and without
experts), Bamba, Falcon-H1, Zamba2, Jamba, Gemma 2, Gemma 3 (text) and gpt-oss, each a tiny random
checkpoint built with transformers' config classes. One server per family: greedy ids over HTTP
equal transformers' for one request and for four at once, and afterwards the KV, SWA and state
pools are empty. For the sliding-window families /metrics reports the SWA pool (SGLang's swa_*
names), the window evicted pages, and the Run tab's SWA pool graph shows it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import torch

from family_checkpoints import FAMILIES, SLIDING_FAMILIES, family_checkpoint
from models_helpers import gated_norm_reference_problem, hf_greedy
from server_helpers import launch_server, wait_idle, wait_ready

pytestmark = pytest.mark.slow  # starts a real server per family

transformers = pytest.importorskip("transformers")
NEW = 5
LENGTHS = (30, 3, 17, 9)  # 30: past a sliding window (5) and a page (16), so the window evicts


@pytest.fixture(scope="module")
def tokenizer():
    from bringup.core.sources.default_model import build_tokenizer

    return build_tokenizer(256)


@pytest.fixture(scope="module")
def served(tokenizer, tmp_path_factory):
    """name -> (transformers' model, its launched server). The next family's server starts while this
    one is tested (two tiny servers at a time), so start-ups overlap the requests and references."""
    launched = {}

    def launch(name):
        folder = tmp_path_factory.mktemp(name)
        hf = family_checkpoint(name, folder, tokenizer)
        launched[name] = hf, launch_server(folder, "--device", "cpu", "--dtype", "float32",
                                           "--max-running-requests", "4", "--chunked-prefill-size", "8")

    def take(name):
        if name not in launched:
            launch(name)
        hf, server = launched.pop(name)
        following = FAMILIES[FAMILIES.index(name) + 1:]
        if following and following[0] not in launched:
            launch(following[0])
        return hf, server

    yield take
    for _, server in launched.values():  # launched ahead but not tested (a -k selection)
        server.process.stop()


def _generate(client, ids):
    r = client.post("/generate", json={"input_ids": ids, "sampling_params": {
        "max_new_tokens": NEW, "temperature": 0, "ignore_eos": True}})
    assert r.status_code == 200, r.text
    return r.json()["output_ids"]


@pytest.mark.parametrize("name", FAMILIES)
def test_serve_gives_transformers_greedy_ids_and_empties_the_pools(name, served, tokenizer, qtbot):
    hf, server = served(name)
    try:
        if problem := gated_norm_reference_problem(hf):
            pytest.skip(problem)
        g = torch.Generator().manual_seed(9)
        prompts = [torch.randint(3, len(tokenizer), (n,), generator=g).tolist() for n in LENGTHS]
        expected = [hf_greedy(hf, p, NEW - 1)[0] for p in prompts]  # while the server starts
        wait_ready(server)
        with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=60) as client:
            assert _generate(client, prompts[0]) == expected[0]
            with ThreadPoolExecutor(len(prompts)) as pool:  # concurrent requests, batched in the engine
                assert list(pool.map(lambda p: _generate(client, p), prompts)) == expected
            info = wait_idle(client)
            metrics_text = client.get("/metrics").text
    finally:
        server.process.stop()
    assert info["pools_check"] == "ok"
    stats = info["stats"]
    assert stats["kv_tokens_used"] == stats["swa_tokens_used"] == stats["state_slots_used"] == 0, stats
    if name in SLIDING_FAMILIES:
        _check_swa_pool(hf.config, info, metrics_text, qtbot)
        assert f"SWA KV Cache is allocated. window: {hf.config.sliding_window}" in server.log
    else:
        assert info["swa_layers"] == [] and stats["state_slots_total"] > 0


def _check_swa_pool(config, info, metrics_text, qtbot):
    from bringup.app.run.live_plots import LivePlots
    from bringup.core.client.metrics_scrape import MetricsReader, parse_prometheus

    sliding = [i for i, kind in enumerate(config.layer_types) if kind == "sliding_attention"]
    assert info["swa_layers"] == sliding and info["sliding_window"] == config.sliding_window
    metrics = parse_prometheus(metrics_text)
    assert metrics["bringup:max_total_num_tokens_swa"] == info["allocated"]["swa_tokens"] > 0
    assert metrics["bringup:swa_used_tokens"] == 0 and metrics["bringup:swa_token_usage"] == 0
    assert metrics["bringup:swa_evicted_tokens_total"] > 0  # the 30-token prompt slid past the window
    # The Run tab's graphs read the same scrape: the SWA pool panel has data and shows.
    plots = LivePlots()
    qtbot.addWidget(plots)
    plots.show()
    plots.add_sample(MetricsReader().sample(metrics_text, t=0.0))
    plots.redraw()
    assert plots.panel_has_data("SWA pool")
    assert plots.history.values("swa_total")[-1] == info["allocated"]["swa_tokens"]
