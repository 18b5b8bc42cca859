"""Every SGLang profile against the release's own source: the snippets tools/sglang_facts.py cut from
each wheel (tests/data/sglang/X/) go through the same extractors, and every fact's value and its file
and line must match the profile. A profile edited by hand, or a fact read from the wrong release,
fails here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bringup.core.rules.profiles import FACTS, NEWEST, OLDEST, PROFILES, profile_for, versions_where

from repo_paths import DATA, REPO

ROOT = REPO
sys.path.insert(0, str(ROOT / "tools"))
from sglang_extract import FixtureSource, catalogue_texts, extract, messages  # noqa: E402

DATA = DATA / "sglang"


def test_a_profile_for_every_release_from_0_5_17():
    assert [p.label for p in PROFILES] == ["0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]
    assert (OLDEST.label, NEWEST.label) == ("0.5.17", "0.5.23")
    assert sorted(d.name for d in DATA.iterdir() if d.is_dir()) == [p.label for p in PROFILES]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.label)
def test_profile_matches_its_wheel_snippets(profile):
    facts = extract(FixtureSource(DATA / profile.label))
    assert set(facts) == set(FACTS) == set(profile.sources)
    for name in FACTS:
        value = getattr(profile, name)
        assert facts[name].value == value, f"{profile.label} {name}"
        assert facts[name].where == profile.sources[name], f"{profile.label} {name} source line"
        assert profile.source(name).startswith(facts[name].path)
    # Diagnosis's message texts: where this release prints each (absent ones are not keys).
    assert messages(FixtureSource(DATA / profile.label)) == profile.messages
    assert set(profile.messages) <= set(catalogue_texts())


def test_the_issue_18_facts_per_release():
    by = {p.label: p for p in PROFILES}
    # PR #32227 ships in 0.5.18: XPU in the platform gate, triton asks the pool for the head size.
    assert "xpu" not in by["0.5.17"].extra_buffer_platforms and by["0.5.17"].triton_probes_layer0
    assert "xpu" in by["0.5.18"].extra_buffer_platforms and not by["0.5.18"].triton_probes_layer0
    assert by["0.5.18"].sources["extra_buffer_platform_message"] == "python/sglang/srt/server_args.py:5811"
    assert by["0.5.18"].sources["triton_probes_layer0"] == "python/sglang/srt/layers/attention/triton_backend.py:227"
    # XPU refused for extra_buffer again from 0.5.20 (overrides.py: `if get_platform().is_xpu: return False`).
    assert [p.label for p in PROFILES if p.extra_buffer_refused_on_xpu] == ["0.5.20", "0.5.21", "0.5.22", "0.5.23"]
    # The "(FLA)" text lasts through 0.5.21; 0.5.22 words it "requires platform support ...".
    assert by["0.5.21"].extra_buffer_platform_message.endswith("(FLA).")
    assert by["0.5.22"].extra_buffer_platform_message == \
        "extra_buffer requires platform support for Mamba cache state snapshots."
    # 0.5.17 already needs --linear-attn-backend triton for extra_buffer.
    assert all(p.extra_buffer_needs_triton_linear_backend for p in PROFILES)
    # intel_xpu: the MLA wording and the prefill-backend snap change in 0.5.20 (the wheels; the issue said 0.5.21).
    assert "for MLA Decode" in by["0.5.19"].intel_xpu_page_message_mla and not by["0.5.19"].intel_xpu_snaps_on_prefill_backend
    assert "for MLA only" in by["0.5.20"].intel_xpu_page_message_mla and by["0.5.20"].intel_xpu_snaps_on_prefill_backend


def test_versions_where_names_the_releases():
    assert versions_where(lambda p: "xpu" in p.extra_buffer_platforms and not p.extra_buffer_refused_on_xpu) == \
        "0.5.18 or 0.5.19"
    assert versions_where(lambda p: p.extra_buffer_refused_on_xpu) == "0.5.20 and later"
    assert versions_where(lambda p: p.triton_probes_layer0) == "0.5.17 only"
    assert versions_where(lambda p: p.scheduler_strategy_alias) == "0.5.17 to 0.5.19"
    assert versions_where(lambda p: False) == "no profiled release"


def test_nearest_profile_lookup():
    assert profile_for((0, 5, 20)).label == "0.5.20"
    assert profile_for((0, 7, 0)) is NEWEST and profile_for((0, 5, 16)) is None


def test_extractor_reads_a_snippet_that_changed(tmp_path):
    """A new release whose gate drops XPU: the extractor reports it, so the profile diff shows it."""
    src = DATA / "0.5.23"
    for f in src.iterdir():
        (tmp_path / f.name).write_text(f.read_text())
    gate = tmp_path / "extra_buffer_platform_gate.py"
    gate.write_text(gate.read_text().replace("        or platform.is_xpu\n", ""))
    facts = extract(FixtureSource(tmp_path))
    assert facts["extra_buffer_platforms"].value == ("cuda", "musa", "npu", "rocm")


def test_maintainer_script_compares_and_emits(capsys):
    """tools/sglang_facts.py: source vs profile (a wrong value or line is reported), and an entry to paste."""
    from dataclasses import replace

    from sglang_facts import compare, compare_messages, emit

    from bringup.core.rules.sglang_profile import SglangProfile

    facts = extract(FixtureSource(DATA / "0.5.20"))
    profile = profile_for((0, 5, 20))
    assert compare(facts, profile) == 0
    wrong = replace(profile, extra_buffer_refused_on_xpu=False,
                    sources={**profile.sources, "triton_probes_layer0": "python/sglang/srt/x.py:1"})
    assert compare(facts, wrong) == 2
    out = capsys.readouterr().out
    assert "extra_buffer_refused_on_xpu" in out and "DIFF" in out and "LINE" in out
    found = messages(FixtureSource(DATA / "0.5.20"))
    assert compare_messages(found, profile) == 0
    assert compare_messages({**found, "Invalid mamba_ssm_dtype": "python/sglang/srt/x.py:2"}, profile) == 1
    entry = eval(emit("0.5.20", facts, found).rstrip().rstrip(","), {"SglangProfile": SglangProfile})
    assert entry == replace(profile, notes="") and entry.sources == profile.sources
    assert entry.messages == profile.messages
