"""Legacy and alternative field names give the same map and counts as the canonical ones."""

from __future__ import annotations

import math

from bringup.core.families import build_layer_map

from layermap_helpers import shared_config


def _same(a, b):
    assert [(l.mixer, l.ffn) for l in a.layers] == [(l.mixer, l.ffn) for l in b.layers]
    assert a.params_total == b.params_total
    assert [(l.kv_elems_per_token, l.conv_state_elems, l.ssm_state_elems) for l in a.layers] == [
        (l.kv_elems_per_token, l.conv_state_elems, l.ssm_state_elems) for l in b.layers
    ]


def test_nemotron_h_mamba_prefixed_names():
    cfg = shared_config("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json")
    legacy = dict(cfg)
    for new, old in (("n_groups", "mamba_n_groups"), ("conv_kernel", "mamba_d_conv"), ("use_conv_bias", "mamba_conv_bias")):
        legacy[old] = legacy.pop(new)
    _same(build_layer_map(cfg), build_layer_map(legacy))


def test_nemotron_h_attention_head_dim_is_the_old_head_dim():
    cfg = shared_config("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json")
    legacy = dict(cfg)
    legacy["attention_head_dim"] = legacy.pop("head_dim")
    _same(build_layer_map(cfg), build_layer_map(legacy))


def test_lfm2_full_attn_idxs_equals_layer_types():
    cfg = shared_config("LiquidAI__LFM2-2.6B.json")
    old = dict(cfg)
    old["full_attn_idxs"] = [i for i, t in enumerate(old.pop("layer_types")) if t == "full_attention"]
    _same(build_layer_map(cfg), build_layer_map(old))


def test_lfm2_block_ff_dim_wins_over_intermediate_size_and_auto_adjust_shrinks_it():
    cfg = shared_config("LiquidAI__LFM2-2.6B.json")
    cfg["intermediate_size"] = 1  # ignored: block_ff_dim is the width transformers uses
    m = build_layer_map(cfg)
    assert m.layers[0].mlp.intermediate == 10752
    cfg["block_auto_adjust_ff_dim"] = True
    # int(2 * 10752 / 3) = 7168, times 1.0, rounded up to a multiple of 256.
    assert build_layer_map(cfg).layers[0].mlp.intermediate == 7168


def test_jamba_dt_rank_auto():
    cfg = shared_config("ai21labs__AI21-Jamba-1.5-Mini.json")
    cfg["mamba_dt_rank"] = "auto"
    assert build_layer_map(cfg).layers[0].mamba.dt_rank == math.ceil(4096 / 16) == 256
    _same(build_layer_map(cfg), build_layer_map(shared_config("ai21labs__AI21-Jamba-1.5-Mini.json")))


def test_kimi_alternative_expert_field_names():
    cfg = shared_config("moonshotai__Kimi-Linear-48B-A3B-Instruct.json")
    alt = dict(cfg)
    alt["num_experts_per_tok"] = alt.pop("num_experts_per_token")
    alt["n_shared_experts"] = alt.pop("num_shared_experts")
    _same(build_layer_map(cfg), build_layer_map(alt))


def test_qwen3_next_explicit_layer_types_equal_the_interval_rule():
    cfg = shared_config("Qwen__Qwen3-Next-80B-A3B-Instruct.json")
    explicit = dict(cfg)
    explicit["layer_types"] = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(48)]
    del explicit["full_attention_interval"]
    _same(build_layer_map(cfg), build_layer_map(explicit))


def test_minimax_layer_types_equal_attn_type_list():
    cfg = shared_config("MiniMaxAI__MiniMax-M1.json")
    v5 = dict(cfg)
    v5["layer_types"] = ["full_attention" if t else "linear_attention" for t in v5.pop("attn_type_list")]
    _same(build_layer_map(cfg), build_layer_map(v5))


def test_integral_floats_are_accepted_as_integers():
    cfg = shared_config("meta-llama__Meta-Llama-3.1-8B.json")
    floaty = dict(cfg, hidden_size=4096.0, num_hidden_layers=32.0)
    _same(build_layer_map(cfg), build_layer_map(floaty))
