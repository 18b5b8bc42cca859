"""`bringup serve` end to end for each linear-attention family of issue 11, one tiny random-weight
checkpoint and one server per family (fp32, CPU): greedy ids over HTTP equal transformers', for one
request and for several at once (chunked prefill 8, so prompts span chunks), and the KV and state
pools are empty afterwards. Qwen3-Next has its own serve test (test_engine_linear_hybrids.py); the
Qwen3.5 dense checkpoint here is the multimodal wrapper (`qwen3_5`, text_config nested, a vision
tower whose weights the engine skips).

Also per family (Qwen3-Next included): `--load-format dummy` from a config.json alone runs requests
to the end on the Engine with finite weights and empty pools, and the transformers model holding the
same random weights (hf_twin.py: the bench's baseline) generates the same greedy tokens."""

from __future__ import annotations

import json

import httpx
import pytest
import torch
from models_helpers import randomize
from server_helpers import start_server, wait_idle

pytestmark = pytest.mark.slow  # starts real servers and engines

transformers = pytest.importorskip("transformers")
NEW = 5
# initializer_range: dummy weights drawn wide enough that greedy tokens are decisive.
TOKENS = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.15)


def _qwen3_5(vocab):
    text = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                head_dim=8, intermediate_size=48, linear_num_key_heads=2, linear_num_value_heads=4,
                linear_key_head_dim=8, linear_value_head_dim=8, linear_conv_kernel_dim=4, **TOKENS)
    vision = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32, patch_size=4,
                  num_position_embeddings=16)
    return transformers.Qwen3_5Config(text_config=text, vision_config=vision, **TOKENS), \
        transformers.Qwen3_5ForConditionalGeneration


def _qwen3_5_moe(vocab):
    return transformers.Qwen3_5MoeTextConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, shared_expert_intermediate_size=24, **TOKENS,
    ), transformers.Qwen3_5MoeForCausalLM


def _qwen3_next(vocab):
    return transformers.Qwen3NextConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, intermediate_size=48, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
        linear_value_head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
        shared_expert_intermediate_size=24, decoder_sparse_step=2, **TOKENS,
    ), transformers.Qwen3NextForCausalLM


def _lfm2(vocab):
    return transformers.Lfm2Config(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, block_multiple_of=16, conv_L_cache=3,
        layer_types=["conv", "full_attention", "conv", "conv"], **TOKENS,
    ), transformers.Lfm2ForCausalLM


def _minimax(vocab):
    return transformers.MiniMaxConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, block_size=8,
        layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"], **TOKENS,
    ), transformers.MiniMaxForCausalLM


def _kimi_linear(vocab):
    return transformers.KimiLinearConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=2, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
        v_head_dim=8, num_experts=4, num_experts_per_token=2, first_k_dense_replace=1,
        linear_attn_config={"full_attn_layers": [3], "kda_layers": [1, 2, 4], "num_heads": 2, "head_dim": 8,
                            "short_conv_kernel_size": 4}, **TOKENS,
    ), transformers.KimiLinearForCausalLM


SERVED = {"qwen3_5": _qwen3_5, "qwen3_5_moe_text": _qwen3_5_moe, "lfm2": _lfm2, "minimax": _minimax,
          "kimi_linear": _kimi_linear}
DUMMY = {**SERVED, "qwen3_next": _qwen3_next}


def hf_generate(hf, prompts, new):
    """transformers' own greedy `generate` (its cache: one prefill, then steps), never stopping at EOS."""
    hf.generation_config.eos_token_id = None
    with torch.inference_mode():
        return [hf.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                            max_new_tokens=new, do_sample=False)[0, len(p):].tolist() for p in prompts]


@pytest.fixture(scope="module")
def tokenizer():
    from bringup.core.sources.default_model import build_tokenizer

    return build_tokenizer(256)


@pytest.fixture(scope="module", params=sorted(SERVED))
def checkpoint(request, tmp_path_factory, tokenizer):
    config, model_cls = SERVED[request.param](len(tokenizer))
    torch.manual_seed(0)
    hf = model_cls(config).eval()
    randomize(hf, seed=4)
    folder = tmp_path_factory.mktemp(request.param)
    hf.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return hf, folder


def test_serve_matches_transformers_single_and_concurrent(checkpoint):
    hf, folder = checkpoint
    vocab = hf.config.get_text_config().vocab_size
    g = torch.Generator().manual_seed(9)
    prompts = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (7, 19, 2, 11)]
    expected = hf_generate(hf, prompts, NEW)
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
        assert stats["state_slots_total"] > 0
    finally:
        server.process.stop()


@pytest.mark.parametrize("family", sorted(DUMMY))
def test_dummy_weights_from_a_config_alone_run_to_the_end(family, tmp_path):
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.sampling import SamplingParams

    config, _ = DUMMY[family](512)
    config.save_pretrained(str(tmp_path))  # config.json only: no weights, no tokenizer
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == family
    engine = Engine(EngineConfig(str(tmp_path), device="cpu", load_format="dummy", max_running_requests=2,
                                 chunked_prefill_size=8), log=lambda m: None)
    prompts = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [9, 10]]
    outs = engine.generate(prompts, SamplingParams(max_new_tokens=4, temperature=0, ignore_eos=True))
    assert [len(o) for o in outs] == [4, 4] and all(0 <= t < 512 for o in outs for t in o)
    assert engine.server_info()["load_format"] == "dummy"
    assert all(torch.isfinite(p).all() for p in engine.model.parameters())
    engine.check_pools()
    stats = engine.stats()
    assert stats["kv_tokens_used"] == 0 and stats["state_slots_used"] == 0 and stats["state_slots_total"] > 0
    from bringup.core.bench.hf_twin import transformers_twin

    twin = transformers_twin(engine.model, engine.config, torch.device("cpu"), torch.float32)
    assert hf_generate(twin, prompts, 4) == outs
