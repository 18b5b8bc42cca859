"""Gemma 2, Gemma 3 (text) and gpt-oss against transformers on tiny random-weight checkpoints
(fp32, CPU): logits after every prefill and decode step, greedy tokens, batched requests of
different lengths joining at different steps, chunked prompts. Windows are short (5 tokens) and the
prompts longer, so the sliding layers really drop keys; sinks, soft-caps and the MoE's clamp act."""

from __future__ import annotations

import pytest
import torch
from models_helpers import DEVICE, Req, randomize, run_engine, standard_requests, assert_matches_hf

from bringup.core.engine.loader import load_model
from sliding_configs import COMMON, VARIANTS

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def checkpoint(request, tmp_path_factory):
    config_cls, model_cls, extra = VARIANTS[request.param]
    torch.manual_seed(0)
    cfg = getattr(transformers, config_cls)(**COMMON, **extra)
    cfg._attn_implementation = "eager"
    hf = getattr(transformers, model_cls)(cfg).eval()
    randomize(hf, seed=1)
    if request.param == "gpt_oss":  # sinks large enough to matter
        with torch.no_grad():
            for layer in hf.model.layers:
                layer.self_attn.sinks.copy_(torch.linspace(-1.0, 2.0, layer.self_attn.sinks.numel()))
    folder = tmp_path_factory.mktemp(request.param)
    hf.save_pretrained(str(folder))
    return request.param, hf, folder


def test_batched_chunked_and_staggered_requests_match_transformers(checkpoint):
    _, hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    assert_matches_hf(hf, run_engine(model, standard_requests(COMMON["vocab_size"])))


def test_long_single_requests_slide_past_the_window(checkpoint):
    _, hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    g = torch.Generator().manual_seed(5)
    for n, chunks in [(11, [4, 3, 4])]:  # chunks that start inside and past the first window
        prompt = torch.randint(3, COMMON["vocab_size"], (n,), generator=g).tolist()
        assert_matches_hf(hf, run_engine(model, [Req(prompt, chunks, steps=6)]))


def test_sliding_layers_follow_the_map(checkpoint):
    name, hf, folder = checkpoint
    model = load_model(folder, device=DEVICE).model
    types = hf.config.layer_types
    for layer, kind in zip(model.decoder.layers, types):
        attn = layer.mixer_module
        assert attn.window == (COMMON["sliding_window"] if kind == "sliding_attention" else None)


def test_gpt_oss_with_the_sum_over_experts_left_to_the_residual_add_matches_transformers(checkpoint):
    """Where the device has a fused gated MoE, gpt-oss takes its unsummed form (ops.moe_gated_experts_unsummed,
    [T, k, H]) and the next residual add sums the k parts in its own kernel ((None, routed) to
    ops.add_rms_norm). On a CPU the references are registered as the fast ops (the reference module's
    unsummed form comes with them), so the wiring is what is checked."""
    from models_helpers import load_with_fast_op

    from bringup.kernels.reference import moe_gated_experts

    name, hf, folder = checkpoint
    if name != "gpt_oss":
        pytest.skip("gpt-oss only")
    model, registered = load_with_fast_op(folder, "moe_gated_experts", moe_gated_experts)
    assert not registered or hasattr(model.ops, "moe_gated_experts_unsummed")
    moe = model.decoder.layers[0].ffn_module
    parts = moe(torch.randn(3, COMMON["hidden_size"], device=DEVICE))
    assert isinstance(parts, tuple) and parts[0] is None and parts[1].shape[:2] == (3, 2)
    assert_matches_hf(hf, run_engine(model, standard_requests(COMMON["vocab_size"])))
