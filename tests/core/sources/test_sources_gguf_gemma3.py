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
