"""`bringup serve` end to end on a tiny random Falcon-H1 (every layer needs a KV page and a state
slot): greedy ids over HTTP equal transformers', for one request and for several at once, and the
KV and state pools are empty afterwards."""

from __future__ import annotations

import httpx
import pytest
import torch
from models_helpers import hf_greedy, randomize
from server_helpers import start_server, wait_idle

pytestmark = pytest.mark.slow  # starts a real server

transformers = pytest.importorskip("transformers")
NEW = 5


@pytest.fixture(scope="module")
def falcon_h1(tmp_path_factory):
    from bringup.core.engine.default_model import build_tokenizer

    folder = tmp_path_factory.mktemp("falcon_h1")
    tokenizer = build_tokenizer(256)
    cfg = transformers.FalconH1Config(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, intermediate_size=24, mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=2,
        mamba_d_state=8, mamba_chunk_size=4, embedding_multiplier=2.0, key_multiplier=0.7, ssm_out_multiplier=0.6,
        bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    hf = transformers.FalconH1ForCausalLM(cfg).eval()
    randomize(hf, seed=4)
    hf.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return hf, folder


def test_serve_matches_transformers_single_and_concurrent(falcon_h1):
    hf, folder = falcon_h1
    g = torch.Generator().manual_seed(9)
    prompts = [torch.randint(3, hf.config.vocab_size, (n,), generator=g).tolist() for n in (7, 19, 2, 11)]
    expected = [hf_greedy(hf, p, NEW - 1)[0] for p in prompts]
    server = start_server(folder, "--max-running-requests", "4", "--chunked-prefill-size", "8")
    try:
        sp = {"max_new_tokens": NEW, "temperature": 0, "ignore_eos": True}
        with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=60) as client:
            one = client.post("/generate", json={"input_ids": prompts[0], "sampling_params": sp})
            assert one.status_code == 200, one.text
            assert one.json()["output_ids"] == expected[0]
            many = client.post("/generate", json={"input_ids": prompts, "sampling_params": sp})
            assert many.status_code == 200, many.text
            assert [m["output_ids"] for m in many.json()] == expected
            stats = wait_idle(client)["stats"]
        assert stats["kv_tokens_used"] == 0 and stats["state_slots_used"] == 0, stats
    finally:
        server.process.stop()
