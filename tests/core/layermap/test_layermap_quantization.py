"""Reading quantization configs into weight schemes, per module and per layer of the map.

The tables are shaped as the public checkpoints' config.json write them (DeepSeek/Qwen3 FP8,
llm-compressor's FP8_BLOCK and W4A16, modelopt FP8 / NVFP4 / MIXED_PRECISION, gpt-oss mxfp4, MLX),
put on real configs from ../shared/models."""

from __future__ import annotations

import json

import pytest

from bringup.core.errors import UserError
from bringup.core.families import build_layer_map
from bringup.core.layermap.layer_schemes import layer_schemes, weights_bytes
from bringup.core.layermap.quantization import matches, read_quantization

from repo_paths import NANO_CONFIG, SHARED_MODELS

FP8_BLOCK = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
             "modules_to_not_convert": ["lm_head", "model.embed_tokens", "mixer.gate"]}


def nano(quant: dict | None) -> dict:
    config = json.loads(NANO_CONFIG.read_text())
    if quant is not None:
        config["quantization_config"] = quant
    return config


def test_dense_config_has_no_quantization():
    assert read_quantization(nano(None)) is None


def test_fp8_block_scaled_reads_block_and_activations():
    q = read_quantization(nano(FP8_BLOCK))
    s = q.default
    assert (s.key, s.weight_dtype, s.block) == ("fp8_block", "fp8_e4m3", (128, 128))
    assert s.bits == pytest.approx(8 + 32 / 16384)
    assert "per token" in s.activations
    assert q.scheme_for("backbone.layers.1.mixer.experts.3.up_proj").key == "fp8_block"
    assert q.scheme_for("lm_head").key == "dense"
    assert q.scheme_for("backbone.layers.1.mixer.gate").key == "dense"


def test_every_nano_layer_gets_the_fp8_scheme_and_half_the_bf16_bytes():
    m = build_layer_map(nano(FP8_BLOCK))
    schemes = layer_schemes(m)
    assert len(schemes) == m.num_layers
    assert {s.mixer.key for s in schemes if s.mixer} == {"fp8_block"}
    assert {s.ffn.key for s in schemes if s.ffn} == {"fp8_block"}
    dense_bytes = weights_bytes(build_layer_map(nano(None)))
    fp8 = weights_bytes(m)
    assert dense_bytes == m.params_total * 2
    # Layers at one byte a weight, embeddings and lm_head kept in bf16.
    assert 0.5 * dense_bytes < fp8 < 0.56 * dense_bytes


def test_compressed_tensors_fp8_block_with_regex_ignore():
    ct = {"quant_method": "compressed-tensors", "format": "float-quantized",
          "config_groups": {"group_0": {"targets": ["Linear"],
                                        "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                                                    "block_structure": [128, 128], "symmetric": True, "dynamic": False},
                                        "input_activations": {"num_bits": 8, "type": "float", "strategy": "group",
                                                              "group_size": 128, "dynamic": True}}},
          "ignore": ["lm_head", "re:.*mlp.gate$"]}
    q = read_quantization({"model_type": "qwen3_moe", "quantization_config": ct})
    assert q.method == "compressed-tensors" and q.default.key == "fp8_block"
    assert q.scheme_for("model.layers.0.mlp.gate").key == "dense"
    assert q.scheme_for("model.layers.0.mlp.gate_proj").key == "fp8_block"  # `gate$`: not gate_proj


def test_compressed_tensors_w4a16_groups():
    ct = {"quant_method": "compressed-tensors", "format": "pack-quantized",
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int",
                                        "strategy": "group", "group_size": 128, "symmetric": True}}},
          "ignore": ["lm_head"]}
    s = read_quantization({"quantization_config": ct}).default
    assert (s.key, s.weight_dtype, s.group_size) == ("int4_group", "int4", 128)
    assert s.bits == pytest.approx(4.125)


def test_modelopt_nvfp4_with_exclude_globs_on_the_map():
    modelopt = {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                "exclude_modules": ["lm_head", "backbone.layers.*.mixer.gate", "*mixer.in_proj*", "*mixer.out_proj*"]}
    m = build_layer_map(nano(modelopt))
    by_layer = {s.index: s for s in layer_schemes(m)}
    assert by_layer[0].mixer.key == "dense"  # Mamba2: in_proj/out_proj excluded
    moe = m.moe_layers[0]
    assert by_layer[moe].ffn.key == "nvfp4" and by_layer[moe].ffn.bits == pytest.approx(4.5)
    assert "fp8_e4m3 per 16" in by_layer[moe].ffn.scales


def test_hf_quant_config_shape_is_read_as_modelopt():
    raw = {"producer": {"name": "modelopt", "version": "0.35.0"},
           "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]}}
    q = read_quantization({"quantization_config": raw})
    assert q.method == "modelopt" and q.default.key == "fp8_tensor"


def test_modelopt_mixed_precision_lists_layers():
    layers = {"backbone.layers.1.mixer.experts.0.up_proj": {"quant_algo": "NVFP4", "group_size": 16},
              "backbone.layers.1.mixer.experts.0.down_proj": {"quant_algo": "NVFP4", "group_size": 16},
              "backbone.layers.0.mixer.in_proj": {"quant_algo": "FP8"}}
    m = build_layer_map(nano({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}))
    by_layer = {s.index: s for s in layer_schemes(m)}
    assert by_layer[0].mixer.key == "fp8_tensor"
    assert by_layer[1].ffn.key == "nvfp4"
    assert by_layer[2].mixer.key == "dense"  # not listed: not quantized


def test_gpt_oss_mxfp4_held_config():
    config = json.loads((SHARED_MODELS / "openai__gpt-oss-20b.json").read_text())
    q = read_quantization(config)
    assert q.default.key == "mxfp4" and q.default.bits == pytest.approx(4.25)
    assert q.scheme_for("model.layers.3.self_attn.q_proj").key == "dense"
    assert q.scheme_for("model.layers.3.mlp.experts.gate_up_proj").key == "mxfp4"
    m = build_layer_map(config)
    assert {s.ffn.key for s in layer_schemes(m)} == {"mxfp4"}


def test_mlx_four_bit_with_overrides():
    q = read_quantization({"quantization": {"group_size": 64, "bits": 4, "model.layers.0.mlp.gate": False,
                                            "lm_head": {"group_size": 64, "bits": 8}}})
    assert q.method == "mlx" and q.default.key == "mlx_int4" and q.default.bits == pytest.approx(4.5)
    assert q.scheme_for("lm_head").key == "mlx_int8"
    assert q.scheme_for("model.layers.0.mlp.gate").key == "dense"


def test_gguf_tensor_types_per_layer():
    config = {"model_type": "llama", "gguf": {"tensor_types": {
        "model.layers.0.mlp.down_proj.weight": "Q6_K", "model.layers.0.self_attn.o_proj.weight": "Q4_K",
        "model.layers.1.mlp.down_proj.weight": "Q4_K", "model.layers.1.self_attn.o_proj.weight": "Q4_K",
        "model.embed_tokens.weight": "Q8_0", "model.layers.0.input_layernorm.weight": "F32"}}}
    q = read_quantization(config)
    assert q.default.key == "gguf_q4_k" and q.default.bits == pytest.approx(4.5)
    assert q.scheme_for("model.layers.0.mlp.down_proj").bits == pytest.approx(6.5625)
    assert q.scheme_for("model.embed_tokens").key == "gguf_q8_0"


def test_unknown_dialect_is_refused_with_its_name():
    with pytest.raises(UserError, match="'hqq'.*reads"):
        read_quantization({"quantization_config": {"quant_method": "hqq"}})


@pytest.mark.parametrize("pattern, module, expected", [
    ("re:.*mlp.gate$", "model.layers.0.mlp.gate", True),
    ("re:.*mlp.gate$", "model.layers.0.mlp.gate_proj", False),
    ("model.layers.*.self_attn", "model.layers.12.self_attn.q_proj", True),
    ("lm_head", "lm_head", True),
    ("*mixer.in_proj*", "backbone.layers.0.mixer.in_proj", True),
    ("model.layers.1.mlp", "model.layers.11.mlp.up_proj", False),
])
def test_module_patterns(pattern, module, expected):
    assert matches(pattern, module) is expected


def test_the_map_layers_carry_their_scheme_and_json_shows_it():
    m = build_layer_map(nano(FP8_BLOCK))
    assert all(l.weights is not None and l.weights.index == l.index for l in m.layers)
    doc = m.layers[1].to_json()
    assert doc["weights"] == {"index": 1, "mixer": None, "ffn": "fp8_block"}
    assert "weights" not in build_layer_map(nano(None)).layers[1].to_json()  # dense documents keep their shape


def test_an_unreadable_quantization_table_is_a_note_and_the_map_is_drawn():
    m = build_layer_map(nano({"quant_method": "hqq", "nbits": 4}))
    assert m.num_layers == 52 and all(l.weights is None for l in m.layers)
    assert any("'hqq'" in n for n in m.notes)



@pytest.mark.parametrize("table, field", [
    ({"quant_method": "mxfp4", "modules_to_not_convert": True}, "field modules_to_not_convert is True"),
    ({"quant_method": "fp8", "ignored_layers": "lm_head"}, "field ignored_layers is 'lm_head'"),
    ({"quant_method": "fp8", "weight_block_size": True}, r"\(fp8\) has a field of the wrong kind"),
])
def test_a_quantization_table_with_a_field_of_the_wrong_kind_is_refused_naming_it(table, field):
    """Found by the config fuzz (a bool where the list of kept modules goes raised TypeError)."""
    with pytest.raises(UserError, match=field):
        read_quantization({"model_type": "gpt_oss", "quantization_config": table})
