"""Tiny configs of the sliding-window families (transformers config class, model class, kwargs),
shared by the model, serve and dummy-weight tests: windows shorter than the prompts, so the sliding
layers really drop keys; sinks, soft-caps and the MoE's clamp act."""

from __future__ import annotations


def gpt_oss_swiglu_limit(wanted: float = 1.0) -> float:
    """A clamp the tiny weights reach (`wanted`) where transformers reads `swiglu_limit` from the config
    (5.25 does); 5.17 (the H200's) hard-codes 7.0 in GptOssExperts and ignores the config's, so a test
    comparing against it must use 7.0 too. Our engine reads the config's (real gpt-oss: 7.0)."""
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts

    probe = GptOssConfig(hidden_size=8, intermediate_size=8, num_local_experts=2, swiglu_limit=wanted)
    return wanted if GptOssExperts(probe).limit == wanted else 7.0


COMMON = dict(vocab_size=96, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
              intermediate_size=48, sliding_window=5, max_position_embeddings=256)
VARIANTS = {
    # Alternating sliding/full, both soft-caps, a query_pre_attn_scalar different from head_dim.
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(
        num_hidden_layers=3, attn_logit_softcapping=5.0, final_logit_softcapping=8.0, query_pre_attn_scalar=12)),
    # 2 sliding then 1 full, q/k norms, different RoPE bases per kind (local 10k, global scaled).
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        num_hidden_layers=4, layer_types=["sliding_attention", "sliding_attention", "full_attention",
                                          "sliding_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 100000.0}})),
    # Sinks, YaRN, 4 experts top-2 with a clamp that bites (limit 1.0).
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", dict(
        num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2, swiglu_limit=gpt_oss_swiglu_limit(),
        rope_parameters={"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "truncate": False, "original_max_position_embeddings": 64, "rope_theta": 10000.0})),
}
