"""transformers saves a default MTP block list in every NemotronH config; only num_nextn_predict_layers > 0 makes them real."""

from __future__ import annotations

from layermap_helpers import shared_config

from bringup.core.families import build_layer_map


def _nano(**extra) -> dict:
    return {**shared_config("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"), **extra}


def test_saved_default_mtp_list_with_zero_predict_layers_means_no_mtp_blocks():
    layer_map = build_layer_map(_nano(mtp_layers_block_type=["full_attention", "moe"], num_nextn_predict_layers=0))
    assert layer_map.mtp_layers == () or list(layer_map.mtp_layers) == []
    assert layer_map.num_layers == 52


def test_mtp_blocks_counted_when_predict_layers_are_on():
    layer_map = build_layer_map(_nano(mtp_layers_block_type=["full_attention", "moe"], num_nextn_predict_layers=1))
    assert [layer.mixer for layer in layer_map.mtp_layers] == ["attention", "none"]
