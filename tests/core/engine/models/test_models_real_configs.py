"""The real configs in shared/models: our model classes build from each supported one and its layer
map (on the meta device: no memory) and ask for exactly the caches the layer map predicts, at its
layers and with its per-token and per-request sizes; unsupported ones get a message naming what is
supported."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch

from bringup.core.engine.loader import decode_special_floats
from bringup.core.engine.models import UnsupportedModelError, model_class_for, supported_model_types
from bringup.core.families import build_layer_map
from bringup.kernels.dispatch import ops_for

from repo_paths import SHARED_MODELS

MODELS = SHARED_MODELS
CONFIGS = sorted(MODELS.glob("*.json"))


def _config(path: Path) -> dict:
    return decode_special_floats(json.loads(path.read_text()))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_supported_configs_build_with_the_layer_maps_caches(path):
    config = _config(path)
    if config.get("model_type") not in supported_model_types():
        runs = re.escape(f"is not supported by the embedded engine; it runs {', '.join(supported_model_types())}.")
        with pytest.raises(UnsupportedModelError, match=runs):
            model_class_for(config)
        return
    layer_map = build_layer_map(config)
    with torch.device("meta"):
        model = model_class_for(config)(config, ops_for("cpu"), layer_map)
    spec = model.cache_spec
    layers = layer_map.layers
    assert spec.kv_layer_ids == tuple(layer.index for layer in layers if layer.is_kv)
    assert spec.state_layer_ids == tuple(layer.index for layer in layers if layer.is_state)
    for layer in layers:
        if layer.is_kv:
            v = 0 if spec.latent_kv else (spec.v_head_dim or spec.head_dim)  # MLA: one latent vector, K and V
            assert layer.kv_elems_per_token == spec.num_kv_heads * (spec.head_dim + v)
        if layer.is_state:
            assert layer.conv_state_elems == math.prod(spec.conv_shape)
            assert layer.ssm_state_elems == math.prod(spec.ssm_shape)


def test_nemotron_3_nano_is_the_30b_it_says():
    config = _config(MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json")
    with torch.device("meta"):
        model = model_class_for(config)(config, ops_for("cpu"), build_layer_map(config))
    assert model.cache_spec.kv_layer_ids == (5, 12, 19, 26, 33, 42)
    params = sum(p.numel() for p in model.parameters())
    assert 31.0e9 < params < 32.0e9, params  # 31.6B with all 128 experts of each of the 23 MoE layers


def test_kimi_linear_48b_keeps_the_latent_at_its_one_based_attention_layers():
    config = _config(MODELS / "moonshotai__Kimi-Linear-48B-A3B-Instruct.json")
    with torch.device("meta"):
        model = model_class_for(config)(config, ops_for("cpu"), build_layer_map(config))
    spec = model.cache_spec
    assert spec.kv_layer_ids == (3, 7, 11, 15, 19, 23, 26)  # full_attn_layers [4, 8, ..., 27], 1-based
    assert (spec.num_kv_heads, spec.head_dim, spec.latent_kv) == (1, 512 + 64, True)
    assert spec.conv_shape == (3 * 32 * 128, 3) and spec.ssm_shape == (32, 128, 128)
    params = sum(p.numel() for p in model.parameters())
    assert 48.5e9 < params < 50.0e9, params  # "48B-A3B": 256 experts in each of 26 MoE layers
