"""Every real config in ../shared/models maps exactly as EXPECTED.md says (read in place)."""

from __future__ import annotations

import pytest

from bringup.core.families import FAMILY_MODULES, build_layer_map
from bringup.core.layermap.vocabulary import FFNS, MIXERS, STATE_MIXERS
from bringup.core.sources.resolve import load_layer_map

from layermap_helpers import SHARED_MODELS, expected_table, shared_files

TABLE = expected_table()


def test_expected_md_covers_every_shared_config():
    assert sorted(TABLE) == sorted(p.name for p in shared_files())
    assert len(TABLE) >= 12


@pytest.mark.parametrize("file", sorted(TABLE))
def test_shared_config_maps_as_expected(file):
    want = TABLE[file]
    m = load_layer_map(SHARED_MODELS / file)
    assert m.model_type == want.model_type
    assert m.num_layers == want.layers
    full = want.full_attention if want.full_attention is not None else list(range(want.layers))
    assert m.full_attention_layers == full
    assert len(m.full_attention_layers) == want.full_count
    assert m.sliding_attention_layers == want.sliding
    assert len(m.state_layers) == want.state


@pytest.mark.parametrize("file", sorted(TABLE))
def test_pool_indices_count_only_the_pools_own_layers(file):
    m = load_layer_map(SHARED_MODELS / file)
    assert [l.kv_pool_index for l in m.layers if l.is_kv] == list(range(len(m.kv_layers)))
    assert [l.state_pool_index for l in m.layers if l.is_state] == list(range(len(m.state_layers)))
    for l in m.layers:
        assert l.mixer in MIXERS and l.ffn in FFNS
        assert (l.kv_pool_index is None) == (not l.is_kv)
        assert (l.state_pool_index is None) == (not l.is_state)
        assert (l.kv_elems_per_token > 0) == l.is_kv
        assert (l.conv_state_elems + l.ssm_state_elems > 0) == (l.mixer in STATE_MIXERS)
        assert 0 < l.active_params <= l.params


def test_the_per_family_rules_of_expected_md():
    from layermap_helpers import shared_config

    # Qwen3-Next: every FFN is the sparse MoE (num_experts 512, decoder_sparse_step 1).
    assert len(build_layer_map(shared_config("Qwen__Qwen3-Next-80B-A3B-Instruct.json")).moe_layers) == 48
    # Kimi: layer 0 is dense (first_k_dense_replace 1), the rest MoE.
    kimi = build_layer_map(shared_config("moonshotai__Kimi-Linear-48B-A3B-Instruct.json"))
    assert kimi.mlp_layers == [0] and kimi.moe_layers == list(range(1, 27))
    # Jamba 1.5 Mini: MoE on odd layers.
    jamba = build_layer_map(shared_config("ai21labs__AI21-Jamba-1.5-Mini.json"))
    assert jamba.moe_layers == list(range(1, 32, 2)) and {l.mixer for l in jamba.layers} == {"mamba", "attention"}
    # MiniMax and gpt-oss: every layer MoE; LFM2, Falcon-H1, Llama, Qwen3, Gemma 3: every layer MLP.
    for f in ("MiniMaxAI__MiniMax-M1.json", "openai__gpt-oss-20b.json"):
        assert len(build_layer_map(shared_config(f)).moe_layers) == TABLE[f].layers
    for f in ("LiquidAI__LFM2-2.6B.json", "tiiuae__Falcon-H1-0.5B.json", "Qwen__Qwen3-8B.json",
              "meta-llama__Meta-Llama-3.1-8B.json", "google__gemma-3-1b-it.json"):
        assert len(build_layer_map(shared_config(f)).mlp_layers) == TABLE[f].layers
    # Falcon-H1: every layer is both a KV layer and a state layer.
    falcon = build_layer_map(shared_config("tiiuae__Falcon-H1-0.5B.json"))
    assert falcon.kv_layers == falcon.state_layers == list(range(36))


@pytest.mark.parametrize(
    "file, family",
    [
        ("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json", "mamba2"),
        ("tiiuae__Falcon-H1-0.5B.json", "mamba2"),
        ("LiquidAI__LFM2-2.6B.json", "mamba2"),
        ("Qwen__Qwen3-Next-80B-A3B-Instruct.json", "gdn"),
        ("moonshotai__Kimi-Linear-48B-A3B-Instruct.json", "kimi_linear"),
        ("MiniMaxAI__MiniMax-M1.json", "linear_attn"),
        ("meta-llama__Meta-Llama-3.1-8B.json", None),
        ("openai__gpt-oss-20b.json", None),
    ],
)
def test_hybrid_family_follows_sglangs_mambaish_split(file, family):
    assert load_layer_map(SHARED_MODELS / file).family == family


def test_every_model_type_in_the_dispatch_table_has_its_module():
    import importlib

    for model_type, module in FAMILY_MODULES.items():
        mod = importlib.import_module(f"bringup.core.families.{module}")
        assert model_type in mod.MODEL_TYPES
