"""Our dense Llama / Qwen3 / Qwen2 / Mistral against transformers' on tiny random-weight
checkpoints (fp32, CPU): logits after every prefill and decode step and greedy tokens, for
batched requests of different lengths, chunked prefill, and single requests."""

from __future__ import annotations

import pytest
import torch
from models_helpers import DEVICE, Req, assert_matches_hf, load_with_fast_op, randomize, run_engine, standard_requests

from bringup.core.engine.loader import load_model

transformers = pytest.importorskip("transformers")

SIZES = dict(vocab_size=96, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=64)
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8, "rope_theta": 500.0}
FAMILIES = {
    # Llama 3.1-style scaled RoPE (short original context so the scaling acts on test positions).
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(rope_parameters=LLAMA3_ROPE, head_dim=16)),
    # Qwen3: q/k RMSNorm per head, tied embeddings (as its small models ship).
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=16, tie_word_embeddings=True)),
    # Qwen2: q/k/v biases.
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    # Qwen3-MoE: softmax-routed SwiGLU experts in layer 1, a dense MLP in layer 0 (mlp_only_layers).
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(head_dim=16, num_experts=6, num_experts_per_tok=2,
                                                               moe_intermediate_size=24, norm_topk_prob=True,
                                                               mlp_only_layers=[0])),
    # Mistral with a sliding window shorter than the prompts.
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=5, head_dim=12)),
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def checkpoint(request, tmp_path_factory):
    config_cls, model_cls, extra = FAMILIES[request.param]
    torch.manual_seed(0)
    cfg = getattr(transformers, config_cls)(**SIZES, **extra)
    hf = getattr(transformers, model_cls)(cfg).eval()
    randomize(hf, seed=2)
    folder = tmp_path_factory.mktemp(request.param)
    hf.save_pretrained(str(folder))
    return hf, folder


def test_batched_chunked_and_staggered_requests_match_transformers(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    assert_matches_hf(hf, run_engine(model, standard_requests(SIZES["vocab_size"])))


def test_single_request_matches_transformers(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    prompt = torch.randint(3, SIZES["vocab_size"], (9,), generator=torch.Generator().manual_seed(3)).tolist()
    assert_matches_hf(hf, run_engine(model, [Req(prompt, [2, 7], steps=5)]))


def test_every_layer_is_a_kv_layer_and_none_needs_state(checkpoint):
    hf, folder = checkpoint
    spec = load_model(folder, device=DEVICE).model.cache_spec
    assert spec.kv_layer_ids == (0, 1)
    assert spec.state_layer_ids == ()
    head_dim = getattr(hf.config, "head_dim", None) or SIZES["hidden_size"] // SIZES["num_attention_heads"]
    assert spec.num_kv_heads == 2 and spec.head_dim == head_dim


def test_tied_embeddings_share_one_tensor(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    tied = model.lm_head.weight is model.model.embed_tokens.weight
    assert tied == bool(hf.config.tie_word_embeddings)


def test_qwen3_moe_through_the_fused_gated_experts_op_matches_transformers(tmp_path):
    """Where the device has a fused gated MoE (the GPU's Triton chain), Qwen3-MoE's experts run through
    ops.moe_gated_experts (gate, up, down in that order, SwiGLU). On a CPU the op is made "fast" by
    registering its reference, so the model's wiring of it is what is checked against transformers."""
    from bringup.kernels.reference import moe_gated_experts

    config_cls, model_cls, extra = FAMILIES["qwen3_moe"]
    torch.manual_seed(0)
    hf = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**SIZES, **extra)).eval()
    randomize(hf, seed=2)
    hf.save_pretrained(str(tmp_path))
    model, _ = load_with_fast_op(tmp_path, "moe_gated_experts", moe_gated_experts)
    sparse = [layer.ffn_module for layer in model.decoder.layers if hasattr(layer.ffn_module, "gated")]
    assert sparse and all(m.gated for m in sparse)
    assert_matches_hf(hf, run_engine(model, standard_requests(SIZES["vocab_size"])))
