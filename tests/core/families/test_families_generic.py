"""The generic path: any model_type transformers knows, read through its config class and a meta build.

Families with their own module are cross-checked against it layer by layer; families without one
(MiMo-V2-Flash: sliding layers with attention sinks from a pattern; DeepSeek-V3.2: lightning-indexer
sparse attention) map through it with the right mixers, MoE layers and KV accounting.
"""

from __future__ import annotations

import argparse
import json

import pytest

from bringup.core.errors import UserError
from bringup.core.families import build_layer_map

from layermap_helpers import shared_config, shared_files
from layermap_helpers import A4B, SHARING_TEXT
from test_families_params import DEFAULT_CASES, as_transformers_sees_it

transformers = pytest.importorskip("transformers")

FIELDS = ("mixer", "ffn", "params", "active_params", "kv_elems_per_token", "conv_state_elems", "ssm_state_elems",
          "kv_pool_index", "state_pool_index", "kv_shared_from")


# The sizes the planner and the rules read from the typed geometry (TP splits, windows, experts), by display name.
ATTRS = ("experts", "top_k", "heads", "kv_heads", "head_dim", "window", "mamba_heads", "mamba_head_dim", "mamba_groups",
         "d_state", "conv_kernel")


def _same_maps(family, generic, fields=FIELDS):
    assert generic.provenance["path"] == "transformers" and family.provenance["path"] == "family"
    assert generic.num_layers == family.num_layers
    for field in fields:
        ours, theirs = [getattr(l, field) for l in family.layers], [getattr(l, field) for l in generic.layers]
        assert ours == theirs, field
    for ours, theirs in zip(family.layers, generic.layers):
        mine, generic_facts = ours.facts(), theirs.facts()
        assert {k: mine[k] for k in ATTRS if k in mine} == {k: generic_facts.get(k) for k in ATTRS if k in mine}
    assert (family.params_total, family.params_active, family.family) == (generic.params_total, generic.params_active, generic.family)


@pytest.mark.parametrize("file", [p.name for p in shared_files()])
def test_family_modules_agree_with_the_generic_path_on_real_configs(file):
    cfg = as_transformers_sees_it(shared_config(file))
    _same_maps(build_layer_map(cfg), build_layer_map(cfg, reader="transformers"))


@pytest.mark.parametrize("model_type, overrides", DEFAULT_CASES, ids=[c[0] for c in DEFAULT_CASES])
def test_family_modules_agree_with_the_generic_path_on_small_configs(model_type, overrides):
    cfg = transformers.AutoConfig.for_model(model_type, **overrides).to_dict()
    fields = FIELDS
    if model_type == "zamba2":
        # Zamba2's shared blocks: the family counts them all outside; transformers' modules leave a block
        # used by one hybrid layer inside it. Totals agree; the per-layer split is a matter of policy.
        fields = tuple(f for f in FIELDS if f not in ("params", "active_params"))
    _same_maps(build_layer_map(cfg), build_layer_map(cfg, reader="transformers"), fields)


@pytest.mark.parametrize("config", [A4B, {"model_type": "gemma4", "text_config": SHARING_TEXT}], ids=["26B-A4B", "kv-sharing"])
def test_gemma4_family_agrees_with_the_generic_path(config):
    _same_maps(build_layer_map(config), build_layer_map(config, reader="transformers"))


def _mimo(**overrides) -> dict:
    return transformers.AutoConfig.for_model("mimo_v2_flash", **overrides).to_dict()


def test_mimo_v2_flash_maps_through_the_generic_path():
    # Full size (transformers' defaults are MiMo-V2-Flash's shapes); meta build, about 0.1 s.
    cfg = _mimo()
    m = build_layer_map(cfg)
    assert m.provenance["path"] == "transformers" and m.provenance["layer kinds"] == "config.layer_types"
    full = [0] + [i for i in range(48) if (i + 1) % 6 == 0]
    assert m.full_attention_layers == full
    assert m.sliding_attention_layers == [i for i in range(48) if i not in full]
    assert m.mlp_layers == [0] and m.moe_layers == list(range(1, 48))
    swa, glob = m.layers[1], m.layers[5]
    # Sliding layers double the KV heads and carry per-head sinks; K is 192 wide, V 128.
    assert swa.attention.sinks is True and swa.attention.window == 129 and glob.attention.sinks is False
    assert swa.kv_elems_per_token == 8 * (192 + 128) and glob.kv_elems_per_token == 4 * (192 + 128)
    assert swa.moe.experts == 256 and swa.moe.top_k == 8
    routed = 3 * 4096 * 2048
    assert swa.params - swa.active_params == (256 - 8) * routed
    assert 300e9 < m.params_total < 320e9 and 14e9 < m.params_active < 17e9
    assert m.family is None and m.state_layers == []


def test_a_pattern_list_chooses_the_sliding_layers():
    kinds = ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]
    m = build_layer_map(_mimo(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=32, v_head_dim=16, n_routed_experts=4, moe_intermediate_size=32,
                              intermediate_size=128, vocab_size=500, layer_types=kinds,
                              mlp_layer_types=["dense", "sparse", "dense", "sparse"]))
    assert m.full_attention_layers == [1] and m.sliding_attention_layers == [0, 2, 3]
    assert m.moe_layers == [1, 3] and m.mlp_layers == [0, 2]
    assert [l.kv_elems_per_token for l in m.layers] == [4 * 48, 2 * 48, 4 * 48, 4 * 48]
    assert [l.kv_pool_index for l in m.layers] == [0, 1, 2, 3]


def test_deepseek_v32_lightning_indexer_layers_are_sparse_attention():
    cfg = transformers.AutoConfig.for_model(
        "deepseek_v32", num_hidden_layers=5, hidden_size=256, num_attention_heads=4, q_lora_rank=64, kv_lora_rank=32,
        qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32, index_n_heads=2, index_head_dim=24,
        n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, intermediate_size=512, vocab_size=1000,
        first_k_dense_replace=2, n_group=1, topk_group=1).to_dict()
    m = build_layer_map(cfg)
    assert [l.mixer for l in m.layers] == ["sparse_attention"] * 5
    assert m.sparse_attention_layers == m.full_attention_layers == m.kv_layers == [0, 1, 2, 3, 4]
    assert m.mlp_layers == [0, 1] and m.moe_layers == [2, 3, 4]
    layer = m.layers[2]
    # The MLA latent (kv_lora_rank + rope dim) and the indexer's key per token.
    assert layer.kv_elems_per_token == 32 + 16 + 24
    attn = layer.attention
    assert attn.latent is not None and attn.indexer_head_dim == 24 and attn.index_topk == 2048
    assert (layer.moe.experts, layer.moe.top_k) == (8, 2)


def test_inspect_shows_which_facts_came_from_the_generic_path(tmp_path, capsys):
    from bringup.core.cli import inspect as inspect_cli

    path = tmp_path / "config.json"
    path.write_text(json.dumps(_mimo(num_hidden_layers=6, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
                                     n_routed_experts=4, moe_intermediate_size=32, intermediate_size=128, vocab_size=500)))
    # In-process: a `bringup inspect` child would spend seconds importing torch and transformers.
    assert inspect_cli.main(argparse.Namespace(source=str(path), pp=1, json=False)) == 0
    text = capsys.readouterr().out
    assert "read by        generic path: transformers" in text and "MiMoV2FlashConfig" in text
    assert inspect_cli.main(argparse.Namespace(source=str(path), pp=1, json=True)) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["provenance"]["path"] == "transformers" and doc["provenance"]["parameters"].startswith("the meta-device")
    assert doc["full_attention_layers"] == [0, 5] and doc["moe_layers"] == [1, 2, 3, 4, 5]


def test_family_maps_say_which_module_read_them():
    m = build_layer_map(shared_config("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"))
    assert m.provenance == {"path": "family", "reader": "core/families/nemotron_h.py"}


def test_configs_transformers_rejects_give_a_clear_error():
    bad = _mimo(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, num_key_value_heads=2, vocab_size=500)
    bad["layer_types"] = ["full_attention", "no_such_attention", "full_attention", "full_attention"]
    with pytest.raises(UserError, match="rejects this config"):
        build_layer_map(bad)
    with pytest.raises(UserError, match="num_hidden_layers"):
        build_layer_map(dict(bad, num_hidden_layers=100_000))


def test_unknown_model_type_names_the_ways_in():
    with pytest.raises(UserError, match="transformers"):
        build_layer_map({"model_type": "no_such_model_type_xyz", "hidden_size": 64})
    with pytest.raises(UserError, match="no config class"):
        build_layer_map({"model_type": "no_such_model_type_xyz"}, reader="transformers")


def test_gemma3n_kv_sharing_is_read_from_transformers_modules():
    # No family module: the attention modules say which layer's KV they reuse.
    m = build_layer_map({"model_type": "gemma3n_text", "num_hidden_layers": 10, "num_kv_shared_layers": 4,
                         "hidden_size": 256, "intermediate_size": 512, "vocab_size": 500, "vocab_size_per_layer_input": 500,
                         "hidden_size_per_layer_input": 16, "laurel_rank": 8, "altup_num_inputs": 2,
                         "layer_types": ["sliding_attention"] * 4 + ["full_attention"] + ["sliding_attention"] * 4 + ["full_attention"]})
    assert m.provenance["path"] == "transformers"
    assert m.kv_shared_layers == [6, 7, 8, 9]
    assert [m.layers[i].kv_shared_from for i in (6, 7, 8, 9)] == [5, 5, 5, 4]
    assert m.kv_layers == [0, 1, 2, 3, 4, 5] and all(m.layers[i].kv_elems_per_token == 0 for i in (6, 7, 8, 9))


def test_linear_attention_layers_are_told_apart_by_their_modules():
    m = build_layer_map({"model_type": "olmo_hybrid", "num_hidden_layers": 4, "hidden_size": 256,
                         "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 500, "pad_token_id": 0})
    assert m.provenance["path"] == "transformers" and m.family == "gdn"
    assert [l.mixer for l in m.layers] == ["gated_delta_net"] * 3 + ["attention"]
    gdn = m.layers[0]
    assert gdn.state_pool_index == 0 and gdn.conv_state_elems > 0 and gdn.ssm_state_elems > 0


def test_loading_says_the_map_is_built_through_transformers(tmp_path):
    from bringup.core.sources.resolve import load_layer_map

    path = tmp_path / "config.json"
    path.write_text(json.dumps(_mimo(num_hidden_layers=2, hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
                                     n_routed_experts=4, moe_intermediate_size=32, intermediate_size=256, vocab_size=300)))
    seen = []
    m = load_layer_map(path, progress=seen.append)
    assert seen[-1].startswith("building the layer map through transformers") and m.provenance["path"] == "transformers"
