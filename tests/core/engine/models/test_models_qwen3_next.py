"""Our Qwen3-Next / Qwen3.5 (gated DeltaNet + gated attention) against transformers' on tiny
random-weight checkpoints (fp32, CPU): logits after every prefill and decode step, greedy tokens,
batched requests of different lengths joining at different steps, chunked prompts, and the state
pool's slots shaped as the DeltaNet layers need (conv window + recurrent state)."""

from __future__ import annotations

import pytest
import torch
from models_helpers import DEVICE, Req, randomize, run_engine, standard_requests, assert_matches_hf

from bringup.core.engine.loader import load_model

transformers = pytest.importorskip("transformers")

BASE = dict(
    vocab_size=96, hidden_size=48, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=6,
    linear_conv_kernel_dim=4,
)
MOE = dict(num_experts=6, num_experts_per_tok=2, moe_intermediate_size=24, shared_expert_intermediate_size=32)
VARIANTS = {
    # MoE on every other layer (decoder_sparse_step), the rest dense; half the head rotates.
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM",
                   dict(intermediate_size=64, decoder_sparse_step=2, partial_rotary_factor=0.5, **MOE)),
    "qwen3_5_text": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM", dict(intermediate_size=64)),
    "qwen3_5_moe_text": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM", MOE),
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def checkpoint(request, tmp_path_factory):
    config_cls, model_cls, extra = VARIANTS[request.param]
    torch.manual_seed(0)
    cfg = getattr(transformers, config_cls)(**BASE, **extra)
    hf = getattr(transformers, model_cls)(cfg).eval()
    randomize(hf, seed=1)
    folder = tmp_path_factory.mktemp(request.param)
    hf.save_pretrained(str(folder))
    return hf, folder


def test_batched_chunked_and_staggered_requests_match_transformers(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    assert_matches_hf(hf, run_engine(model, standard_requests(BASE["vocab_size"])))


def test_single_requests_match_transformers(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    g = torch.Generator().manual_seed(5)
    for n, chunks in [(10, [5, 1, 4])]:  # a one-token chunk steps the state
        prompt = torch.randint(3, BASE["vocab_size"], (n,), generator=g).tolist()
        assert_matches_hf(hf, run_engine(model, [Req(prompt, chunks, steps=3)]))


def test_state_slots_are_shaped_for_the_delta_net_layers(checkpoint):
    hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    types = hf.config.layer_types
    spec = model.cache_spec
    assert spec.kv_layer_ids == tuple(i for i, t in enumerate(types) if t == "full_attention")
    assert spec.state_layer_ids == tuple(i for i, t in enumerate(types) if t == "linear_attention")
    conv_dim = 2 * 2 * 8 + 4 * 6  # q and k (2 heads x 8) and v (4 heads x 6)
    assert spec.conv_shape == (conv_dim, BASE["linear_conv_kernel_dim"] - 1)
    assert spec.ssm_shape == (4, 8, 6)
    assert (spec.num_kv_heads, spec.head_dim) == (2, 16)
    # The planner's per-layer state elements (from the layer map) are what the pool allocates.
    layer = model.layer_map.layers[spec.state_layer_ids[0]]
    assert layer.conv_state_elems == conv_dim * 3 and layer.ssm_state_elems == 4 * 8 * 6


def test_bfloat16_runs_and_stays_close_to_float32(checkpoint):
    """bf16 weights and pools (the recurrent state stays float32); the (1 + w) norms rounded once at load."""
    from models_helpers import make_pools

    hf, folder = checkpoint
    if hf.config.model_type != "qwen3_next":
        pytest.skip("one variant is enough: the bf16 paths are shared")
    model = load_model(folder, dtype="bfloat16", device=DEVICE).model
    assert model.dtype == torch.bfloat16
    kv, state = make_pools(model, dtype=torch.bfloat16)
    req = [Req([5, 9, 17, 3, 8, 2, 40], [4, 3], steps=2)]
    ours = run_engine(model, req, kv_pool=kv, state_pool=state)[0].logits[0]
    fp32 = run_engine(load_model(folder, device=DEVICE).model, [Req([5, 9, 17, 3, 8, 2, 40], [4, 3], steps=2)])[0].logits[0]
    assert torch.isfinite(ours).all()
    assert torch.nn.functional.cosine_similarity(ours, fp32, dim=0) > 0.99


_GPU_OP_SET = """
import sys, torch
sys.path[:0] = {paths!r}
from models_helpers import assert_matches_hf, run_engine, standard_requests
import transformers
from bringup.core.bench.launch_count import gpu_weight_layout, use_gpu_ops_on_cpu
from bringup.core.engine.loader import load_model
names = use_gpu_ops_on_cpu()  # the GPU's Triton ops interpreted, q/k/v and gate/up stacked
hf = getattr(transformers, {model_cls!r}).from_pretrained({folder!r}).eval()
with gpu_weight_layout():
    model = load_model({folder!r}, device="cpu").model
assert_matches_hf(hf, run_engine(model, standard_requests({vocab})), atol=1e-4)
print("ok")
"""


def test_the_gpu_op_set_interpreted_matches_transformers(checkpoint):
    """Stacked q/k/v (the output gate inside q's rows) and gate/up, the fused norm-rope-cache-write and
    decode attention with partial rotary, the one-launch router, the routed parts summed in the next
    residual add: the GPU's wiring, its Triton kernels under the interpreter."""
    import sys

    from triton_interpreter import assert_interpreted_ok

    pytest.importorskip("triton")
    hf, folder = checkpoint
    model_cls = VARIANTS[hf.config.model_type][1]
    assert_interpreted_ok(_GPU_OP_SET.format(paths=[p for p in sys.path if p.endswith("helpers")], folder=str(folder),
                                             model_cls=model_cls, vocab=BASE["vocab_size"]))
