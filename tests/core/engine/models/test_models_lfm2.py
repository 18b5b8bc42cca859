"""Our LFM2 (gated short conv + QK-norm attention) against transformers' on a tiny random-weight
checkpoint (fp32, CPU): logits and greedy tokens across batched, chunked and staggered requests;
the state slots hold the conv window only."""

from __future__ import annotations

import math

import pytest
import torch
from models_helpers import DEVICE, Req, randomize, run_engine, standard_requests, assert_matches_hf

from bringup.core.engine.loader import load_model

transformers = pytest.importorskip("transformers")

CONFIG = dict(vocab_size=96, hidden_size=48, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=96, block_multiple_of=16, conv_L_cache=3,
              layer_types=["conv", "full_attention", "conv", "conv"])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    hf = transformers.Lfm2ForCausalLM(transformers.Lfm2Config(**CONFIG)).eval()
    randomize(hf, seed=1)
    folder = tmp_path_factory.mktemp("lfm2")
    hf.save_pretrained(str(folder))
    return hf, folder


def test_batched_chunked_and_staggered_requests_match_transformers(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    assert_matches_hf(hf, run_engine(model, standard_requests(CONFIG["vocab_size"])))
    assert_matches_hf(hf, run_engine(model, [Req([5, 9, 17, 3, 8, 2, 40, 11], [3, 1, 4], steps=3)]))


def test_state_slots_hold_the_conv_window_only(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    spec = model.cache_spec
    assert spec.kv_layer_ids == (1,) and spec.state_layer_ids == (0, 2, 3)
    assert spec.conv_shape == (48, CONFIG["conv_L_cache"] - 1)
    assert math.prod(spec.ssm_shape) == 0
    layer = model.layer_map.layers[0]
    assert layer.conv_state_elems == 48 * 2 and layer.ssm_state_elems == 0
