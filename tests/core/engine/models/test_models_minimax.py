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

transformers = pytest.importorskip("transformers")

CONFIG = dict(
    vocab_size=96, hidden_size=48, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=12,
    intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, block_size=8,
    layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"],
    full_attn_alpha_factor=1.2, full_attn_beta_factor=0.8, linear_attn_alpha_factor=0.9, linear_attn_beta_factor=1.1,
    mlp_alpha_factor=1.05, mlp_beta_factor=0.95,
)


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
