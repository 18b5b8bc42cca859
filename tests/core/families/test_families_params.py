"""Parameter counts from the config alone match what transformers builds on the meta device."""

from __future__ import annotations

import pytest

from bringup.core.families import build_layer_map

from layermap_helpers import shared_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def transformers_count(config: dict) -> int:
    cfg = dict(config)
    cfg.pop("auto_map", None)
    hf_config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    return sum(p.numel() for p in model.parameters())


def as_transformers_sees_it(config: dict) -> dict:
    """The same model in the form transformers 5 accepts (the facts are unchanged)."""
    cfg = dict(config)
    if cfg["model_type"] == "falcon_h1":
        # The shared copy omits mamba_d_ssm; transformers' default (1024) would contradict the heads.
        cfg["mamba_d_ssm"] = cfg["mamba_n_heads"] * cfg["mamba_d_head"]
    if cfg["model_type"] == "minimax_m1":
        # MiniMax-M1 is remote code; transformers' `minimax` is the same network with layer_types.
        cfg["model_type"] = "minimax"
        cfg["layer_types"] = ["full_attention" if t else "linear_attention" for t in cfg.pop("attn_type_list")]
    return cfg


@pytest.mark.parametrize(
    "file",
    [
        "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json",
        "nvidia__Nemotron-H-56B-Base-8K.json",
        "Qwen__Qwen3-Next-80B-A3B-Instruct.json",
        "ai21labs__AI21-Jamba-1.5-Mini.json",
        "tiiuae__Falcon-H1-0.5B.json",
        "LiquidAI__LFM2-2.6B.json",
        "openai__gpt-oss-20b.json",
        "meta-llama__Meta-Llama-3.1-8B.json",
        "Qwen__Qwen3-8B.json",
        "google__gemma-3-1b-it.json",
        "moonshotai__Kimi-Linear-48B-A3B-Instruct.json",
        "MiniMaxAI__MiniMax-M1.json",
    ],
)
def test_real_config_params_match_transformers_meta_build(file):
    cfg = shared_config(file)
    ours = build_layer_map(cfg).params_total
    theirs = transformers_count(as_transformers_sees_it(cfg))
    assert ours == theirs


# Families without a shared config: transformers' own defaults, shrunk, with the switches that matter.
DEFAULT_CASES = [
    # Nemotron-3 Super/Ultra style: a block list without num_hidden_layers, and a latent MoE.
    ("nemotron_h", dict(layers_block_type=["linear_attention", "moe", "full_attention", "mlp", "linear_attention", "moe"],
                        hidden_size=512, moe_latent_size=128, n_routed_experts=16, num_experts_per_tok=4,
                        moe_intermediate_size=256, moe_shared_expert_intermediate_size=512, intermediate_size=1024)),
    ("granitemoehybrid", dict(num_hidden_layers=4, layer_types=["mamba", "attention", "mamba", "mamba"], hidden_size=512,
                              num_attention_heads=8, mamba_n_heads=16, intermediate_size=256, shared_intermediate_size=512)),
    ("granitemoehybrid", dict(num_hidden_layers=4, layer_types=["mamba", "attention", "mamba", "mamba"], hidden_size=512,
                              num_attention_heads=8, mamba_n_heads=16, num_local_experts=0)),
    ("bamba", dict(num_hidden_layers=4, attn_layer_indices=[1], hidden_size=512, num_attention_heads=8, mamba_n_heads=16)),
    ("zamba2", dict(num_hidden_layers=8, layers_block_type=["mamba", "hybrid", "mamba", "hybrid", "mamba", "mamba", "hybrid", "mamba"],
                    hidden_size=256, num_attention_heads=8, n_mamba_heads=8, num_mem_blocks=2,
                    use_shared_attention_adapter=True, adapter_rank=16)),
    ("qwen3_5_text", dict(num_hidden_layers=4, hidden_size=512)),
    ("qwen3_5_moe_text", dict(num_hidden_layers=4, hidden_size=512, num_experts=8)),
    ("gemma2", dict(num_hidden_layers=4)),
    ("gemma4_text", dict(num_hidden_layers=6)),
    # Gemma 4's switches: KV sharing with double-wide MLPs, per-layer inputs, K = V with global KV heads, the MoE block.
    ("gemma4_text", dict(num_hidden_layers=12, hidden_size=256, intermediate_size=512, num_kv_shared_layers=4,
                         use_double_wide_mlp=True, hidden_size_per_layer_input=32, vocab_size_per_layer_input=1000,
                         vocab_size=2000)),
    ("gemma4_text", dict(num_hidden_layers=6, hidden_size=256, intermediate_size=512, attention_k_eq_v=True,
                         num_global_key_value_heads=1, attention_bias=True, enable_moe_block=True, num_experts=8,
                         top_k_experts=2, moe_intermediate_size=64, hidden_size_per_layer_input=0, vocab_size=2000)),
    ("mistral", dict(num_hidden_layers=4, sliding_window=4096)),
    ("qwen2", dict(num_hidden_layers=4)),
    ("mixtral", dict(num_hidden_layers=4)),
    ("qwen3_moe", dict(num_hidden_layers=4, mlp_only_layers=[1])),
    ("granite", dict(num_hidden_layers=4)),
]


@pytest.mark.parametrize("model_type, overrides", DEFAULT_CASES, ids=[c[0] for c in DEFAULT_CASES])
def test_default_config_params_match_transformers_meta_build(model_type, overrides):
    hf_config = transformers.AutoConfig.for_model(model_type, **overrides)
    ours = build_layer_map(hf_config.to_dict()).params_total
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    theirs = sum(p.numel() for p in model.parameters())
    assert ours == theirs


def test_gemma4_26b_a4b_count_matches_transformers():
    from layermap_helpers import A4B

    assert build_layer_map(A4B).params_total == transformers_count(A4B["text_config"]) == 25_233_141_760


def test_active_params_count_only_top_k_experts():
    nano = build_layer_map(shared_config("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"))
    moe = nano.layers[1]
    expert = 2 * 2688 * 1856  # up + down of one routed expert
    assert moe.params - moe.active_params == (128 - 6) * expert
    assert nano.params_active == nano.params_total - 23 * (128 - 6) * expert
    assert build_layer_map(shared_config("meta-llama__Meta-Llama-3.1-8B.json")).params_active is None
