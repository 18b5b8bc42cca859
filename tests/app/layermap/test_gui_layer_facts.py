"""The words and numbers the map shows about a layer."""

from __future__ import annotations

from bringup.core.layermap.sizes import format_bytes
from bringup.app.layermap.facts import compact_ranges, detail_rows, human_count, state_bytes_per_request, tooltip_text
from bringup.core.layermap.vocabulary import Layer


def test_human_numbers():
    assert human_count(31_577_937_344) == "31.6 B"
    assert human_count(3_580_073_408) == "3.58 B"
    assert human_count(950) == "950" and human_count(None) == "—"
    assert format_bytes(1024, short=True) == "1 KiB" and format_bytes(512, short=True) == "512 B"
    assert format_bytes(46.8 * 2**20, short=True) == "46.8 MiB" and format_bytes(3 * 2**40, short=True) == "3 TiB"
    assert format_bytes(49082368) == "46.81 MiB"  # reports keep two decimals


def test_compact_ranges():
    assert compact_ranges([0, 1, 2, 5, 7, 8]) == "0–2, 5, 7–8"
    assert compact_ranges([]) == ""


def test_state_bytes_use_bf16_conv_and_fp32_ssm():
    layer = Layer(index=0, mixer="mamba2", ffn="none", state_pool_index=0, conv_state_elems=1000, ssm_state_elems=100)
    assert state_bytes_per_request(layer) == 1000 * 2 + 100 * 4
    rows = dict(detail_rows(layer))
    assert rows["  conv (bf16)"] == "1.95 KiB" and rows["  SSM (fp32)"] == "400 B"
    tip = tooltip_text(layer, repeats=[0, 2, 4])
    assert "state pool index: 0" in tip and "folded: also layers 0, 2, 4" in tip


def test_unknown_cache_size_is_said_not_zeroed():
    layer = Layer(index=3, mixer="attention", ffn="mlp", kv_pool_index=0)
    assert "size not known" in tooltip_text(layer) and "0 B" not in tooltip_text(layer)
