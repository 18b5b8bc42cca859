"""Every tiny config the model and engine tests build, as config.json would hold it: one or more per
family the engine runs (shared by the geometry-shape test and the dtype test)."""

from __future__ import annotations

# NemotronH (test_models_nemotron_h): the block kinds in two stacks, grouped and latent MoE routing.
NEMOTRON_H = dict(
    vocab_size=96, hidden_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=12,
    intermediate_size=64, mamba_num_heads=6, mamba_head_dim=8, n_groups=2, ssm_state_size=8, conv_kernel=4,
    chunk_size=4, n_routed_experts=8, num_experts_per_tok=3, moe_intermediate_size=24,
    moe_shared_expert_intermediate_size=40, routed_scaling_factor=2.5,
)
NEMOTRON_H_VARIANTS = {
    # Every block kind, grouped routing (best 2 of 4 groups), normalised top-k.
    "grouped": dict(hybrid_override_pattern="M*-EM*E", n_group=4, topk_group=2, norm_topk_prob=True),
    # Mamba-first like Nemotron-3-Nano, ungrouped routing, raw weights, latent MoE projections.
    "latent": dict(hybrid_override_pattern="MEM*EM", n_group=1, topk_group=1, norm_topk_prob=False, moe_latent_size=16),
}
# MiniMax (test_models_minimax): lightning and softmax layers, residual factors all different from 1.
MINIMAX = dict(
    vocab_size=96, hidden_size=48, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=12,
    intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, block_size=8,
    layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"],
    full_attn_alpha_factor=1.2, full_attn_beta_factor=0.8, linear_attn_alpha_factor=0.9, linear_attn_beta_factor=1.1,
    mlp_alpha_factor=1.05, mlp_beta_factor=0.95,
)
# Kimi-Linear (test_models_kimi_linear): layers 1-5 (1-based) KDA, MLA, KDA, KDA, MLA; a dense MLP first, MoE after.
KIMI_LINEAR = {"full_attn_layers": [2, 5], "kda_layers": [1, 3, 4], "num_heads": 2, "head_dim": 8,
               "short_conv_kernel_size": 4}


def tiny_kimi_config(**extra):
    import transformers

    return transformers.KimiLinearConfig(
        vocab_size=96, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_hidden_layers=5,
        num_attention_heads=3, num_key_value_heads=3, kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=4,
        v_head_dim=6, num_experts=6, num_experts_per_token=2, num_expert_group=2, topk_group=1,
        routed_scaling_factor=1.7, linear_attn_config=KIMI_LINEAR, first_k_dense_replace=1, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, **extra)


def tiny_family_configs() -> list[tuple[str, dict]]:
    """(name, config dict) for each tiny variant, transformers' defaults filled in."""
    import transformers

    from engine_helpers import tiny_lfm2_config, tiny_llama_config, tiny_qwen3_next_config
    from hybrid_configs import VARIANTS as HYBRIDS
    from sliding_configs import COMMON as SLIDING_COMMON, VARIANTS as SLIDING

    from bringup.core.sources.default_model import TINY_TEST_SPEC, build_config

    out = [(f"hybrid-{name}", getattr(transformers, cls)(**kwargs).to_dict()) for name, (cls, _, kwargs) in HYBRIDS.items()]
    out += [(f"sliding-{name}", getattr(transformers, cls)(**dict(SLIDING_COMMON, **kwargs)).to_dict())
            for name, (cls, _, kwargs) in SLIDING.items()]
    out += [(f"nemotron-{name}", transformers.NemotronHConfig(**NEMOTRON_H, **extra).to_dict())
            for name, extra in NEMOTRON_H_VARIANTS.items()]
    out += [("kimi", tiny_kimi_config().to_dict()), ("minimax", transformers.MiniMaxConfig(**MINIMAX).to_dict()),
            ("qwen3_next", tiny_qwen3_next_config(96).to_dict()), ("lfm2", tiny_lfm2_config(96).to_dict()),
            ("llama", tiny_llama_config(96).to_dict()), ("nemotron-bundled", build_config(TINY_TEST_SPEC, 96).to_dict())]
    # The other model_types the Llama class runs: q/k norms, biases, a sliding window, routed experts.
    dense = dict(vocab_size=96, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=64, head_dim=16)
    out += [("qwen3", transformers.Qwen3Config(**dense).to_dict()), ("qwen2", transformers.Qwen2Config(**dense).to_dict()),
            ("mistral", transformers.MistralConfig(**dense, sliding_window=5).to_dict()),
            ("qwen3_moe", transformers.Qwen3MoeConfig(**dense, num_experts=6, num_experts_per_tok=2,
                                                      moe_intermediate_size=24, mlp_only_layers=[0]).to_dict())]
    return out
