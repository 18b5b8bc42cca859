"""A Gemma 3 (text) GGUF file as llama.cpp's converter writes it (norms stored as 1 + w, `ffn_norm`
the pre-feed-forward norm beside `post_attention_norm` and `post_ffw_norm`) loads into the engine:
every weight comes back as the checkpoint holds it, and greedy decoding, with the sliding window
biting, equals transformers on the original checkpoint."""

from __future__ import annotations

import pytest
import torch

from gguf_helpers import byte_level_vocab, write_gguf
from models_helpers import hf_greedy, randomize

from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams
from bringup.core.sources.gguf_file import iter_gguf_weights, read_gguf_config

pytestmark = pytest.mark.slow  # runs a real engine
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def gemma3_gguf(tmp_path_factory):
    tokens, merges = byte_level_vocab()
    config = transformers.Gemma3TextConfig(
        vocab_size=len(tokens), hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, intermediate_size=48, sliding_window=5, query_pre_attn_scalar=8, max_position_embeddings=256,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0}})
    torch.manual_seed(0)
    hf = transformers.Gemma3ForCausalLM(config).eval()
    randomize(hf, seed=5)
    path = write_gguf(hf, tmp_path_factory.mktemp("gemma3_gguf") / "tiny-gemma3-f32.gguf", tokens, merges, quant="f32")
    return hf, path


def test_every_weight_comes_back_as_the_checkpoint_holds_it(gemma3_gguf):
    hf, path = gemma3_gguf
    config = read_gguf_config(path)
    assert config["model_type"] == "gemma3_text" and config["sliding_window"] == 5
    assert config["sliding_window_pattern"] == 3 and config["tie_word_embeddings"]
    ours = dict(iter_gguf_weights(path, config))
    theirs = {k: v for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    assert sorted(ours) == sorted(theirs)
    for name, tensor in theirs.items():
        torch.testing.assert_close(ours[name], tensor.float(), atol=1e-6, rtol=0, msg=name)
    # The file follows llama.cpp's conventions as transformers' own GGUF reader knows them: it reads back
    # the same checkpoint (so the test's writer is not merely the inverse of our reader).
    read_back = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                                  dtype=torch.float32).state_dict()
    for name, tensor in theirs.items():
        torch.testing.assert_close(read_back[name], tensor.float(), atol=1e-6, rtol=0, msg=name)


def test_engine_on_the_gguf_decodes_as_transformers_on_the_checkpoint(gemma3_gguf):
    hf, path = gemma3_gguf
    g = torch.Generator().manual_seed(4)
    prompts = [torch.randint(3, hf.config.vocab_size, (n,), generator=g).tolist() for n in (23, 4)]
    expected = [hf_greedy(hf, p, 5)[0] for p in prompts]
    engine = Engine(EngineConfig(str(path), device="cpu", dtype="float32", max_running_requests=2,
                                 chunked_prefill_size=8), log=lambda m: None)
    assert engine.server_info()["swa_layers"] == [0, 1]
    out = engine.generate(prompts, SamplingParams(max_new_tokens=6, temperature=0, ignore_eos=True))
    assert out == expected
    engine.check_pools()


def test_auto_keeps_a_gemma3_file_s_blocks_and_computes_what_its_dequantised_model_does(gemma3_gguf, tmp_path):
    """Gemma 3's layers take GGUF blocks as Llama's do (the real 270M Q4_K_M file ran float32
    dequantised under --dtype auto: 2.5 GB resident); the tied Q8_0 embedding keeps its sqrt(H) scale."""
    from models_helpers import Req, make_pools, run_engine

    from bringup.core.engine.gguf_weights import GgufEmbedding, GgufLinear, prepare_for_cpu
    from bringup.core.engine.loader import load_model

    hf, _ = gemma3_gguf
    tokens, merges = byte_level_vocab()
    path = write_gguf(hf, tmp_path / "tiny-gemma3-q.gguf", tokens, merges, quant="q5")
    engine = Engine(EngineConfig(str(path), device="cpu", dtype="auto", max_running_requests=1, context_length=64),
                    log=lambda m: None)
    weights = engine.server_info()["weights"]
    # (the MLP's down projection, 48 columns, stays F16: read as float32 like the norms)
    assert weights["scheme"] == "GGUF Q4_0, Q4_1, Q8_0 blocks; Q5_1 dequantised to float32"
    assert weights["dequantised_from"] == "" and isinstance(engine.model.input_embedding, GgufEmbedding)
    assert {m.form for m in engine.model.modules() if isinstance(m, GgufLinear)} == {"int4", "widened"}
    kept = load_model(path, dtype="auto").model
    prepare_for_cpu(kept)
    floats = load_model(path, dtype="float32").model
    prompt = list(range(5, 30))  # longer than the sliding window (5)
    kv, state = make_pools(kept, dtype=kept.dtype)
    x = run_engine(kept, [Req(prompt, [25], steps=3)], kv_pool=kv, state_pool=state)[0].logits[0].float()
    y = run_engine(floats, [Req(prompt, [25], steps=3)])[0].logits[0]
    assert (x - y).abs().max() <= 3e-2 * y.abs().max()
