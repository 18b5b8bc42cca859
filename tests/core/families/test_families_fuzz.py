"""Property-based fuzz over the real configs: fields deleted, retyped or corrupted.

Whatever the damage, building a layer map either succeeds with a consistent map or raises a
clean UserError; never another exception.
"""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bringup.core.errors import UserError
from bringup.core.families import build_layer_map
from bringup.core.layermap.folding import fold_layers

from config_fuzz import CONFIGS, damaged_config, junk

def _consistent(m) -> None:
    assert m.num_layers == len(m.layers) > 0
    assert [l.index for l in m.layers] == list(range(m.num_layers))
    assert m.params_total >= 0 and (m.params_active is None or m.params_active <= m.params_total)
    for l in m.layers:
        assert l.kv_elems_per_token >= 0 and l.conv_state_elems >= 0 and l.ssm_state_elems >= 0
        if l.kv_shared_from is not None:  # reads an earlier layer of its own kind that keeps a KV cache
            source = m.layers[l.kv_shared_from]
            assert source.index < l.index and source.is_kv and source.mixer == l.mixer
            assert l.kv_pool_index is None and l.kv_elems_per_token == 0
    assert sum(f.times * len(f.unit) for f in fold_layers(m.layers)) == m.num_layers
    json.dumps(m.to_json())


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_config(), st.integers(1, 4))
def test_damaged_real_configs_give_a_map_or_a_clean_error(case, pp):
    name, cfg = case
    try:
        m = build_layer_map(cfg, name=name, pp=pp)
    except UserError as err:
        assert str(err) and "Traceback" not in str(err)
        return
    _consistent(m)


def _generic_configs() -> dict:
    """Small configs that take the generic (transformers) path, and Gemma 4's, which can take either."""
    import pytest

    transformers = pytest.importorskip("transformers")
    from layermap_helpers import A4B, SHARING_TEXT

    small = dict(hidden_size=128, num_attention_heads=4, vocab_size=300, intermediate_size=256, moe_intermediate_size=32)
    mimo = transformers.AutoConfig.for_model("mimo_v2_flash", num_hidden_layers=6, num_key_value_heads=2, head_dim=32,
                                             v_head_dim=16, n_routed_experts=4, **small)
    dsa = transformers.AutoConfig.for_model("deepseek_v32", num_hidden_layers=4, q_lora_rank=32, kv_lora_rank=16,
                                            qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, index_n_heads=2,
                                            index_head_dim=16, n_routed_experts=4, num_experts_per_tok=2, n_group=1,
                                            topk_group=1, first_k_dense_replace=1, **small)
    return {"mimo_v2_flash": mimo.to_dict(), "deepseek_v32": dsa.to_dict(), "gemma4-26B-A4B": A4B,
            "gemma4-kv-sharing": {"model_type": "gemma4", "text_config": SHARING_TEXT}}


def test_damaged_generic_path_configs_give_a_map_or_a_clean_error():
    configs = _generic_configs()

    # Each example builds a (small) model on the meta device: a few dozen keep this to seconds.
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(damaged_config(configs), st.sampled_from(["auto", "transformers"]))
    def check(case, reader):
        name, cfg = case
        try:
            m = build_layer_map(cfg, name=name, reader=reader)
        except UserError as err:
            assert str(err) and "Traceback" not in str(err)
            return
        _consistent(m)
        assert m.provenance.get("path") in ("family", "transformers", "layer_types")

    check()


@settings(max_examples=60, deadline=None)
@given(st.recursive(junk, lambda children: st.dictionaries(st.text(max_size=20), children, max_size=6), max_leaves=20))
def test_arbitrary_json_gives_a_map_or_a_clean_error(doc):
    try:
        m = build_layer_map(doc)
    except UserError:
        return
    _consistent(m)


def test_nan_and_infinity_in_dimensions_are_rejected_cleanly():
    cfg = json.loads(json.dumps(CONFIGS["nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"]))
    for value in (math.nan, math.inf, -1, 0, 2.5, "2688", True):
        cfg["hidden_size"] = value
        try:
            build_layer_map(cfg)
        except UserError as err:
            assert "hidden_size" in str(err)
        else:
            raise AssertionError(f"hidden_size={value!r} was accepted")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_any_source_text_gives_a_config_or_a_clean_error(text):
    from unittest import mock

    from bringup.core.sources import hub
    from bringup.core.sources.resolve import load_config

    # The hub is out of reach here: answer from the (empty) cache at once instead of retrying.
    with mock.patch.object(hub, "hub_reachable", lambda timeout=3.0: False):
        try:
            loaded = load_config(text)
        except UserError as err:
            assert str(err)
            return
    assert isinstance(loaded.config, dict)
