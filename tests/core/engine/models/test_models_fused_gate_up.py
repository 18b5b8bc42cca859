"""The plain decoder families whose dense MLP is gated give transformers' logits when gate and up run as
one product and act(gate) * up as one op (core/engine/models/fused_gate_up.py, ops.act_and_mul), as on
a GPU: Llama and Qwen3 (SiLU, and Llama with MLP biases), Gemma 2 and Gemma 3 (tanh GELU, the post-norm
after). On the CPU the op's reference is registered as the fast one; the Triton kernel itself runs
under the interpreter for Gemma 3 and Qwen3. Gemma's post norms inside the residual add's op
(stack.PostNormed, add_rms_norm's delta_weight) give transformers' logits too, the Triton
add_rms_norm interpreted in Gemma 3."""

from __future__ import annotations

import sys

import pytest
from models_helpers import assert_matches_hf, hf_checkpoint, load_with_fast_op, run_engine, standard_requests

from bringup.core.engine.models.fused_gate_up import FusedGateUp
from bringup.kernels.reference import act_and_mul, add_rms_norm
from triton_interpreter import assert_interpreted_ok

transformers = pytest.importorskip("transformers")

SIZES = dict(vocab_size=96, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=64, head_dim=16)
GEMMA = dict(SIZES, hidden_size=32, head_dim=8, intermediate_size=48, sliding_window=5, max_position_embeddings=256)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(SIZES, mlp_bias=True)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", SIZES),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(GEMMA, attn_logit_softcapping=50.0,
                                                         final_logit_softcapping=30.0)),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        GEMMA, num_hidden_layers=3, layer_types=["sliding_attention", "sliding_attention", "full_attention"])),
}


def _checkpoint(name, folder):
    return hf_checkpoint(*FAMILIES[name], folder)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_through_one_gate_up_product_matches_transformers(name, tmp_path, monkeypatch):
    hf = _checkpoint(name, tmp_path)
    monkeypatch.setattr(FusedGateUp, "fuse_gate_up", True)
    calls = []

    def counted(x, act):
        calls.append(x.shape)
        return act_and_mul(x, act)

    model, registered = load_with_fast_op(tmp_path, "act_and_mul", counted)
    assert_matches_hf(hf, run_engine(model, standard_requests(FAMILIES[name][2]["vocab_size"])))
    assert not registered or calls and all(s[-1] == 2 * FAMILIES[name][2]["intermediate_size"] for s in calls)
    held = [m for m in model.modules() if isinstance(m, FusedGateUp)]
    assert held and all(m._gate_up_held[1].data_ptr() == m.gate_proj.weight.data_ptr() for m in held)


@pytest.mark.parametrize("name", ["gemma2", "gemma3_text"])
def test_gemma_post_norms_inside_the_residual_add_match_transformers(name, tmp_path):
    hf = _checkpoint(name, tmp_path)
    post_normed = []

    def counted(hidden, delta, weight, eps, **kwargs):
        post_normed.append(kwargs.get("delta_weight") is not None)
        return add_rms_norm(hidden, delta, weight, eps, **kwargs)

    model, registered = load_with_fast_op(tmp_path, "add_rms_norm", counted)
    assert_matches_hf(hf, run_engine(model, standard_requests(FAMILIES[name][2]["vocab_size"])))
    # per forward, 2L + 1 adds (2 per layer, the final norm's): all but the first carry a post norm
    L = FAMILIES[name][2]["num_hidden_layers"]
    assert not registered or post_normed and sum(post_normed) * (2 * L + 1) == len(post_normed) * 2 * L


_INTERPRETED = """
import sys, torch
sys.path[:0] = {paths!r}
from models_helpers import assert_matches_hf, run_engine, standard_requests
import transformers
from bringup.core.engine.loader import load_model
from bringup.core.engine.models.fused_gate_up import FusedGateUp
from bringup.kernels import dispatch
from bringup.kernels.triton.act_and_mul import act_and_mul
from bringup.kernels.triton.norms import add_rms_norm
FusedGateUp.fuse_gate_up = True
dispatch.register("act_and_mul", "cpu", act_and_mul, name="triton")
if {post_norm!r}:  # Gemma's post norms in the residual add's kernel
    dispatch.register("add_rms_norm", "cpu", add_rms_norm, name="triton")
hf = transformers.{cls}.from_pretrained({folder!r}).eval()
model = load_model({folder!r}, device="cpu").model
assert_matches_hf(hf, run_engine(model, standard_requests(96)), atol=1e-4)
print("ok")
"""


@pytest.mark.parametrize("name", ["gemma3_text", "qwen3"])
def test_family_through_the_triton_kernels_interpreted_matches_transformers(name, tmp_path):
    pytest.importorskip("triton")
    _checkpoint(name, tmp_path)
    code = _INTERPRETED.format(paths=[p for p in sys.path if p.endswith("helpers")], folder=str(tmp_path),
                               cls=FAMILIES[name][1], post_norm=name.startswith("gemma"))
    assert_interpreted_ok(code)
