"""The engine's models are built from the layer map (core/families/), the one reading of a config's
block list: the modules, the caches and the plan all follow it (built on the meta device: no memory)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from bringup.core.engine.loader import build_model
from bringup.core.engine.models import model_class_for
from bringup.core.engine.models.stack import UnsupportedLayerError
from bringup.core.families import build_layer_map
from bringup.kernels.dispatch import ops_for

NEMOTRON = dict(
    model_type="nemotron_h", vocab_size=64, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
    intermediate_size=48, mamba_num_heads=4, mamba_head_dim=8, n_groups=2, ssm_state_size=8, conv_kernel=4,
    n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, moe_shared_expert_intermediate_size=16,
)
LLAMA = dict(model_type="llama", vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=2)


def meta_model(config: dict, layer_map=None):
    layer_map = layer_map or build_layer_map(config)
    with torch.device("meta"):
        return model_class_for(config)(config, ops_for("cpu"), layer_map)


def kinds(model) -> list[tuple[str, str]]:
    return [(layer.mixer_kind, layer.ffn_kind) for layer in model.decoder.layers]


def test_nemotron_blocks_and_caches_are_the_maps():
    model = meta_model(dict(NEMOTRON, hybrid_override_pattern="M*-EM"))
    assert kinds(model) == [("mamba2", "none"), ("attention", "none"), ("none", "mlp"), ("none", "moe"),
                            ("mamba2", "none")]
    assert type(model.decoder.layers[3].mixer).__name__ == "MoE"  # checkpoint name: backbone.layers.3.mixer
    spec = model.cache_spec
    assert spec.kv_layer_ids == (1,) and spec.state_layer_ids == (0, 4)
    assert spec.conv_shape == (4 * 8 + 2 * 2 * 8, 3) and spec.ssm_shape == (4, 8, 8)


def test_unknown_pattern_characters_are_moe_blocks_as_in_the_map():
    """NVIDIA's configuration code reads any other character as MoE; the layer map does, so the engine does."""
    config = dict(NEMOTRON, hybrid_override_pattern="M*X")
    layer_map = build_layer_map(config)
    assert [l.ffn for l in layer_map.layers] == ["none", "none", "moe"]
    assert kinds(meta_model(config, layer_map))[2] == ("none", "moe")


def test_layers_block_type_spellings_build_the_same_model():
    pattern = meta_model(dict(NEMOTRON, hybrid_override_pattern="M*-E"))
    names = meta_model(dict(NEMOTRON, layers_block_type=["mamba", "attention", "mlp", "moe"]))
    assert kinds(pattern) == kinds(names)


def test_dense_sliding_windows_and_sparse_layers_follow_the_map():
    mistral = meta_model(dict(LLAMA, model_type="mistral", sliding_window=16))
    assert [l.self_attn.window for l in mistral.decoder.layers] == [16] * 4
    qwen = meta_model(dict(LLAMA, model_type="qwen2", sliding_window=16, use_sliding_window=True, max_window_layers=2))
    assert [l.self_attn.window for l in qwen.decoder.layers] == [None, None, 16, 16]
    assert [k for k, _ in kinds(qwen)] == ["attention", "attention", "sliding_attention", "sliding_attention"]
    moe = meta_model(dict(LLAMA, model_type="qwen3_moe", head_dim=8, num_experts=4, num_experts_per_tok=2,
                          moe_intermediate_size=16, decoder_sparse_step=2, mlp_only_layers=[3]))
    assert [f for _, f in kinds(moe)] == ["mlp", "moe", "mlp", "mlp"]
    assert [i for i, (_, f) in enumerate(kinds(moe)) if f == "moe"] == moe.layer_map.moe_layers


def test_a_kind_the_model_does_not_build_is_a_clear_error():
    config = dict(LLAMA)
    layer_map = build_layer_map(config)
    odd = replace(layer_map, layers=(replace(layer_map.layers[0], mixer="gated_delta_net"), *layer_map.layers[1:]))
    with pytest.raises(UnsupportedLayerError, match=r"layer 0 is a 'gated_delta_net' mixer, which the engine's Llama "
                                                    r"model does not build \(it builds mixers attention, sliding_attention\)"):
        meta_model(config, odd)


def test_loader_keeps_the_map_it_built_from():
    model = build_model(dict(LLAMA), device="cpu", name="tiny", source="here")
    assert model.layer_map.name == "tiny" and model.layer_map.kv_layers == [0, 1, 2, 3]
    assert model.cache_spec.kv_layer_ids == (0, 1, 2, 3)
