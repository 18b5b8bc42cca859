"""Every family whose attention goes through rotary_attention (core/engine/models/attention.py) gives
transformers' logits when the q/k norms, the rotary embedding and the KV-cache write run as the one
fused op (qk_norm_rope_kv_write), as on a GPU: Llama (scaled RoPE), Qwen3 (q/k norms), Qwen2 (biases),
Mistral (sliding), Gemma 3 (1 + w norms multiplied in float32, RoPE per layer kind), gpt-oss (YaRN
scaling, sinks), LFM2 (q/k norms beside short convs). On the CPU the op's reference is registered as
the fast one; the Triton kernel itself runs under the interpreter in one family (Qwen3) with q/k/v
fused as on a GPU. The same families through rope_paged_decode at decode (the op above and the decode
attention in one), the Triton kernel interpreted in Qwen3 too."""

from __future__ import annotations

import sys

import pytest
from models_helpers import assert_matches_hf, hf_checkpoint, load_with_fast_op, run_engine, standard_requests
from sliding_configs import gpt_oss_swiglu_limit

from bringup.kernels.reference import qk_norm_rope_kv_write, rope_paged_decode
from triton_interpreter import assert_interpreted_ok

transformers = pytest.importorskip("transformers")

SIZES = dict(vocab_size=96, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=64)
SLIDING = dict(vocab_size=96, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
               intermediate_size=48, sliding_window=5, max_position_embeddings=256)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(SIZES, head_dim=16, rope_parameters={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8, "rope_theta": 500.0})),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(SIZES, head_dim=16)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", SIZES),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(SIZES, sliding_window=5, head_dim=12)),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        SLIDING, num_hidden_layers=3, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 100000.0}})),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", dict(
        SLIDING, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2, swiglu_limit=gpt_oss_swiglu_limit(),
        rope_parameters={"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "truncate": False, "original_max_position_embeddings": 64, "rope_theta": 10000.0})),
    "lfm2": ("Lfm2Config", "Lfm2ForCausalLM", dict(
        SIZES, num_hidden_layers=4, block_multiple_of=16, conv_L_cache=3,
        layer_types=["conv", "full_attention", "conv", "full_attention"])),
}


def _checkpoint(name, folder):
    return hf_checkpoint(*FAMILIES[name], folder)


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("op, reference", [("qk_norm_rope_kv_write", qk_norm_rope_kv_write),
                                           ("rope_paged_decode", rope_paged_decode)])
def test_family_through_the_fused_rotary_op_matches_transformers(name, op, reference, tmp_path):
    """qk_norm_rope_kv_write: every step's norms, rotary and cache write in one op; rope_paged_decode:
    decode steps' attention with them (prompts through the ops as before)."""
    hf = _checkpoint(name, tmp_path)
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return reference(*args, **kwargs)

    model, registered = load_with_fast_op(tmp_path, op, counted)
    assert_matches_hf(hf, run_engine(model, standard_requests(FAMILIES[name][2]["vocab_size"])))
    assert calls or not registered  # the layers really went through the fused op


_INTERPRETED = """
import sys, torch
sys.path[:0] = {paths!r}
from models_helpers import assert_matches_hf, run_engine, standard_requests
import transformers
from bringup.core.engine.loader import load_model
from bringup.core.engine.models.fused_qkv import FusedQKV
from bringup.kernels import dispatch
from bringup.kernels.triton.qk_norm_rope import qk_norm_rope_kv_write
FusedQKV.fuse_qkv = True  # as on a GPU: q, k, v are views of one product
dispatch.register("qk_norm_rope_kv_write", "cpu", qk_norm_rope_kv_write, name="triton")
if {decode!r}:  # decode steps through the one-launch norms + rotary + write + attention
    from bringup.kernels.triton.rope_paged_decode import rope_paged_decode
    dispatch.register("rope_paged_decode", "cpu", rope_paged_decode, name="triton")
hf = transformers.Qwen3ForCausalLM.from_pretrained({folder!r}).eval()
model = load_model({folder!r}, device="cpu").model
assert_matches_hf(hf, run_engine(model, standard_requests(96)), atol=1e-4)
print("ok")
"""


@pytest.mark.parametrize("decode", [False, True], ids=["rotary-write", "rotary-write-attention"])
def test_qwen3_through_the_triton_kernel_interpreted_matches_transformers(tmp_path, decode):
    pytest.importorskip("triton")
    _checkpoint("qwen3", tmp_path)
    code = _INTERPRETED.format(paths=[p for p in sys.path if p.endswith("helpers")], folder=str(tmp_path),
                               decode=decode)
    assert_interpreted_ok(code)
