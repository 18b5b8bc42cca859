"""Folding repeated units, and the PP split SGLang uses."""

from __future__ import annotations

import pytest

from bringup.core.errors import UserError
from bringup.core.layermap.folding import fold_layers
from bringup.core.layermap.pp_split import pp_layer_ranges
from bringup.core.sources.resolve import load_layer_map

from layermap_helpers import SHARED_MODELS

CHARS = {"M": ("mamba2", "none"), "E": ("none", "moe"), "*": ("attention", "none"), "-": ("none", "mlp")}


def seq(pattern: str):
    return [CHARS[c] for c in pattern]


def text(folds) -> list[tuple[str, int]]:
    back = {v: k for k, v in CHARS.items()}
    return [("".join(back[u] for u in f.unit), f.times) for f in folds]


def covers(folds, n):
    pos = 0
    for f in folds:
        assert f.start == pos and f.times >= 1
        pos = f.stop
    assert pos == n


def test_nemotron_h_56b_reads_as_its_unit_times_ten():
    m = load_layer_map(SHARED_MODELS / "nvidia__Nemotron-H-56B-Base-8K.json")
    folds = fold_layers(m.layers)
    covers(folds, 118)
    assert text(folds)[0] == ("M-M-M-M*-M-", 10)
    assert len(folds) <= 3


def test_nano_folds_its_seven_block_unit():
    m = load_layer_map(SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json")
    folds = fold_layers(m.layers)
    covers(folds, 52)
    assert text(folds)[0] == ("MEMEM*E", 5)


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("MMMM", [("M", 4)]),
        ("M*M*M*", [("M*", 3)]),
        ("M", [("M", 1)]),
        ("M*-E", [("M*-E", 1)]),  # nothing repeats: one run, not four
        ("MMM*MMM*MMM*", [("MMM*", 3)]),
    ],
)
def test_small_folds(pattern, expected):
    folds = fold_layers(seq(pattern))
    covers(folds, len(pattern))
    assert text(folds) == expected


def test_folding_is_deterministic_and_accepts_pairs():
    pattern = seq("MEMEM*EMEMEM*EME" * 3)
    assert fold_layers(pattern) == fold_layers(list(pattern))
    assert fold_layers([]) == []


def test_fold_expands_back_to_the_original():
    for path in sorted(SHARED_MODELS.glob("*.json")):
        layers = load_layer_map(path).layers
        expanded = [u for f in fold_layers(layers) for _ in range(f.times) for u in f.unit]
        assert expanded == [(l.mixer, l.ffn) for l in layers]


@pytest.mark.parametrize(
    "layers, pp, ranges",
    [
        (52, 1, [(0, 52)]),
        (52, 2, [(0, 26), (26, 52)]),
        (52, 3, [(0, 17), (17, 34), (34, 52)]),  # the extra layer goes to the last stage
        (118, 4, [(0, 29), (29, 58), (58, 88), (88, 118)]),  # the last two stages get one more
        (5, 5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]),
    ],
)
def test_pp_split_matches_sglang_get_pp_indices(layers, pp, ranges):
    assert pp_layer_ranges(layers, pp) == ranges


def test_pp_partition_override_and_bad_values():
    assert pp_layer_ranges(10, 2, [3, 7]) == [(0, 3), (3, 10)]
    with pytest.raises(UserError):
        pp_layer_ranges(10, 2, [3, 6])
    with pytest.raises(UserError, match="more pipeline stages"):
        pp_layer_ranges(4, 5)
    with pytest.raises(UserError):
        pp_layer_ranges(4, 0)


def test_layer_map_pp_stages_and_pools():
    m = load_layer_map("NVIDIA-Nemotron-3-Nano-30B-A3B", pp=2)
    assert m.pp_size == 2
    assert [l.pp_stage for l in m.layers] == [0] * 26 + [1] * 26
    # Pool indices stay global over the model (each stage's pool filters them, as SGLang does).
    assert m.layers[33].kv_pool_index == 4
    assert [l.index for l in m.layers_of_stage(1) if l.is_kv] == [26, 33, 42]
