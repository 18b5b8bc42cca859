"""The bundled catalogue: well formed, the default present, facts agreeing with the real configs."""

from __future__ import annotations

import re

import pytest

from bringup.core.sources import catalogue
from bringup.core.families import build_layer_map

from layermap_helpers import shared_config, shared_files


def _shared_file_for(entry) -> str | None:
    """The shared copy of the same model: same owner, repo name equal or a suffixed variant (-80k, -Instruct)."""
    owner, repo = entry.hub_id.split("/")
    for path in shared_files():
        s_owner, s_repo = path.stem.split("__", 1)
        if s_owner == owner and (repo == s_repo or repo.startswith(s_repo + "-")):
            return path.name
    return None


PAIRS = [(e, _shared_file_for(e)) for e in catalogue.entries() if _shared_file_for(e)]


def test_catalogue_is_well_formed_and_holds_the_default():
    entries = catalogue.entries()
    assert 12 <= len(entries) <= 24
    names = [e.name for e in entries]
    assert len(set(n.lower() for n in names)) == len(names)
    assert catalogue.DEFAULT_MODEL in names
    assert catalogue.default_entry().hub_id == "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B"
    for e in entries:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", e.hub_id)
        assert e.hub_id.split("/")[1] == e.name
        assert len(e.why) > 20 and e.family
        assert isinstance(e.facts.get("model_type"), str)


@pytest.mark.parametrize("entry", catalogue.entries(), ids=lambda e: e.name)
def test_every_catalogue_entry_maps_offline(entry):
    m = build_layer_map(entry.config(), name=entry.name)
    assert m.num_layers > 0 and m.params_total > 0
    assert not [n for n in m.notes if "approximate" in n]


def test_most_catalogue_targets_have_a_shared_config_to_check_against():
    assert len(PAIRS) >= 10


@pytest.mark.parametrize("entry, file", PAIRS, ids=[p[0].name for p in PAIRS])
def test_catalogue_facts_agree_with_the_real_config(entry, file):
    real = shared_config(file)
    for key, value in entry.facts.items():
        if key in real:
            assert real[key] == value, f"{entry.name}: {key} is {value!r} in the catalogue, {real[key]!r} in {file}"
    ours, theirs = build_layer_map(entry.config()), build_layer_map(real)
    assert [(l.mixer, l.ffn) for l in ours.layers] == [(l.mixer, l.ffn) for l in theirs.layers]
    assert ours.params_total == theirs.params_total
    assert [l.kv_elems_per_token for l in ours.layers] == [l.kv_elems_per_token for l in theirs.layers]
    assert [l.ssm_state_elems + l.conv_state_elems for l in ours.layers] == [
        l.ssm_state_elems + l.conv_state_elems for l in theirs.layers
    ]


def test_lookup_is_case_insensitive_by_name_or_hub_id():
    assert catalogue.find("nvidia-nemotron-3-nano-30b-a3b").name == catalogue.DEFAULT_MODEL
    assert catalogue.find("Qwen/Qwen3-8B").name == "Qwen3-8B"
    assert catalogue.find("no-such-model") is None


def test_config_is_a_fresh_copy():
    entry = catalogue.default_entry()
    cfg = entry.config()
    cfg["hidden_size"] = 1
    assert entry.config()["hidden_size"] == 2688


@pytest.mark.parametrize(
    "name, published",
    [
        # Targets without a shared config: their facts must reproduce the published parameter count.
        ("Nemotron-H-8B-Base-8K", 8_100_852_736),
        ("LFM2-1.2B", 1_170_340_608),
        ("LFM2-350M", 354_483_968),
    ],
)
def test_facts_of_targets_without_a_shared_config_give_the_published_count(name, published):
    assert build_layer_map(catalogue.find(name).config()).params_total == published
