"""Our MiniMax (lightning attention + softmax attention + MoE, post-norm residuals scaled by the
alpha/beta factors) against transformers' on a tiny random-weight checkpoint (fp32, CPU): logits
and greedy tokens across batched, chunked and staggered requests (prompts longer than the
reference's block so several blocks carry state); slots hold the linear-attention state only."""

from __future__ import annotations

import math

import pytest
import torch
from models_helpers import DEVICE, Req, randomize, run_engine, standard_requests, assert_matches_hf

from bringup.core.engine.loader import load_model
from tiny_family_configs import MINIMAX as CONFIG

transformers = pytest.importorskip("transformers")



@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    hf = transformers.MiniMaxForCausalLM(transformers.MiniMaxConfig(**CONFIG)).eval()
    randomize(hf, seed=1)
    folder = tmp_path_factory.mktemp("minimax")
    hf.save_pretrained(str(folder))
    return hf, folder


def test_batched_chunked_and_staggered_requests_match_transformers(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    assert_matches_hf(hf, run_engine(model, standard_requests(CONFIG["vocab_size"])))
    assert_matches_hf(hf, run_engine(model, [Req(list(range(5, 15)), [5, 1, 4], steps=3)]))


def test_state_slots_hold_the_linear_attention_state_only(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    spec = model.cache_spec
    assert spec.kv_layer_ids == (1,) and spec.state_layer_ids == (0, 2, 3)
    assert spec.ssm_shape == (4, 12, 12) and math.prod(spec.conv_shape) == 0
    layer = model.layer_map.layers[0]
    assert layer.ssm_state_elems == 4 * 12 * 12 and layer.conv_state_elems == 0
