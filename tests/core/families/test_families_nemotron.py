"""NemotronH: the default model's map, cache geometry and the block-list variants."""

from __future__ import annotations

import pytest

from bringup.core.sources import catalogue
from bringup.core.errors import UserError
from bringup.core.families import build_layer_map
from bringup.core.sources.resolve import load_layer_map

from layermap_helpers import SHARED_MODELS, shared_config

NANO = "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"


def test_default_model_is_nemotron_3_nano_with_six_attention_layers():
    m = load_layer_map(catalogue.DEFAULT_MODEL)
    assert m.full_attention_layers == [5, 12, 19, 26, 33, 42]
    assert len(m.state_layers) == 23 and len(m.moe_layers) == 23 and m.num_layers == 52
    assert m.family == "mamba2"
    # Pool indices count only the pool's own layers (global 12 is KV pool index 1).
    assert m.layers[12].kv_pool_index == 1 and m.layers[12].state_pool_index is None
    assert m.layers[0].state_pool_index == 0 and m.layers[0].kv_pool_index is None


def test_nano_cache_geometry_matches_the_hand_computed_figures():
    m = load_layer_map(SHARED_MODELS / NANO)
    kv_bytes = sum(l.kv_elems_per_token for l in m.layers) * 2  # bf16
    assert kv_bytes == 2 * 128 * 2 * 2 * 6 == 6144
    state_bytes = sum(l.conv_state_elems * 2 + l.ssm_state_elems * 4 for l in m.layers)
    # conv: (4096 + 2*8*128) channels x 3 taps in bf16; ssm: 64 heads x 64 x 128 in fp32; 23 layers.
    assert state_bytes == 23 * (6144 * 3 * 2 + 64 * 64 * 128 * 4)
    assert round(state_bytes / 2**20, 1) == 46.8
    attn = m.layers[5].attention
    assert (attn.heads, attn.kv_heads, attn.head_dim) == (32, 2, 128)
    moe = m.layers[1].moe
    assert (moe.experts, moe.top_k, moe.expert_intermediate, moe.shared_intermediate) == (128, 6, 1856, 3712)


def test_layers_block_type_without_num_hidden_layers_matches_the_pattern():
    cfg = shared_config(NANO)
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    listed = dict(cfg, layers_block_type=[names[c] for c in cfg.pop("hybrid_override_pattern")])
    del listed["num_hidden_layers"]
    a = build_layer_map(shared_config(NANO))
    b = build_layer_map(listed)
    assert [(l.mixer, l.ffn) for l in a.layers] == [(l.mixer, l.ffn) for l in b.layers]
    assert a.params_total == b.params_total


def test_transformers_v5_block_names_are_accepted():
    cfg = shared_config(NANO)
    names = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
    cfg["layers_block_type"] = [names[c] for c in cfg.pop("hybrid_override_pattern")]
    assert build_layer_map(cfg).full_attention_layers == [5, 12, 19, 26, 33, 42]


def test_mtp_blocks_are_shown_apart_and_not_counted():
    cfg = shared_config(NANO)
    plain = build_layer_map(cfg)
    cfg["mtp_hybrid_override_pattern"] = "*E"
    m = build_layer_map(cfg)
    assert m.num_layers == 52
    assert [(l.mixer, l.ffn) for l in m.mtp_layers] == [("attention", "none"), ("none", "moe")]
    assert m.params_total == plain.params_total
    cfg = shared_config(NANO)
    cfg["mtp_layers_block_type"] = ["attention", "moe"]
    assert len(build_layer_map(cfg).mtp_layers) == 2


def test_mismatched_num_hidden_layers_gives_a_note_and_the_pattern_wins():
    cfg = shared_config(NANO)
    cfg["num_hidden_layers"] = 50
    m = build_layer_map(cfg)
    assert m.num_layers == 52
    assert any("num_hidden_layers" in n for n in m.notes)


def test_a_config_without_a_block_schedule_is_a_clean_error():
    cfg = shared_config(NANO)
    del cfg["hybrid_override_pattern"]
    with pytest.raises(UserError, match="hybrid_override_pattern"):
        build_layer_map(cfg)
