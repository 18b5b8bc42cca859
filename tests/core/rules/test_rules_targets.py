"""Target strings and version profiles: nearest earlier profile, said as a finding; nothing guessed."""

from __future__ import annotations

import pytest
from packaging.version import Version
from rules_helpers import NANO, codes, finding, run

from bringup.core.errors import UserError
from bringup.core.rules import known_targets, parse_target


@pytest.mark.parametrize("text,profile", [("sglang==0.5.17", "0.5.17"), ("sglang==0.5.19", "0.5.19"),
                                          ("sglang==0.5.21", "0.5.21"), ("sglang==0.5.23", "0.5.23"),
                                          ("SGLang==0.5.19.post1", "0.5.19")])
def test_exact_profiles(text, profile):
    t = parse_target(text)
    assert t.engine == "sglang" and t.profile.label == profile
    if text.endswith(profile):
        assert t.findings == ()


@pytest.mark.parametrize("version", ["0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"])
def test_every_release_from_0_5_17_has_its_own_profile(version):
    """Read from each wheel (issue 18): no release between profiles is inferred any more."""
    t = parse_target(f"sglang=={version}")
    assert t.profile.label == version and t.findings == ()
    r = run(NANO, f"sglang=={version}", device="xpu")
    assert "TARGET_PROFILE_NEAREST" not in codes(r) and r.to_json()["target"]["version"] == version


def test_newer_than_every_profile_warns_and_uses_the_newest():
    t = parse_target("sglang==0.6.2")
    (note,) = t.findings
    assert t.profile.label == "0.5.23" and note.severity == "warning" and note.code == "TARGET_PROFILE_NEAREST"
    assert "0.5.23" in note.message and "Releases after it may have changed" in note.message


def test_older_than_every_profile_is_refused_not_guessed():
    with pytest.raises(UserError, match="older than the oldest rule profile"):
        parse_target("sglang==0.5.10")


@pytest.mark.parametrize("text", ["vllm==0.9.0", "sglang==0.5", "sglang==latest", "", "sglang=0.5.17"])
def test_bad_target_strings(text):
    with pytest.raises(UserError, match="sglang==X.Y.Z"):
        parse_target(text)


def test_embedded_and_bare_sglang():
    assert parse_target("embedded").engine == "embedded"
    bare = parse_target("sglang")
    assert bare.profile.label == "0.5.23" and bare.findings[0].code == "TARGET_VERSION_ASSUMED"
    assert known_targets()[0] == "embedded" and "sglang==0.5.17" in known_targets()


def test_profile_changes_are_what_the_findings_follow():
    """The same launch on each profile: only the profile data differs."""
    gate = {t: finding(run(NANO, t, device="cpu"), "EXTRA_BUFFER_PLATFORM").engine_message
            for t in ("sglang==0.5.17", "sglang==0.5.18", "sglang==0.5.21", "sglang==0.5.22")}
    assert gate == {
        "sglang==0.5.17": "AssertionError: extra_buffer needs CUDA/MUSA/NPU/ROCm (FLA).",
        "sglang==0.5.18": "AssertionError: extra_buffer needs CUDA/MUSA/NPU/ROCm/XPU (FLA).",
        "sglang==0.5.21": "AssertionError: extra_buffer needs CUDA/MUSA/NPU/ROCm/XPU (FLA).",
        "sglang==0.5.22": "AssertionError: extra_buffer requires platform support for Mamba cache state snapshots.",
    }


def test_release_suffixes_order_as_pep_440():
    """A post release uses its release's profile; a release candidate comes before its release, so it
    takes the profile (or vLLM facts) of the release before, never a newer one's."""
    assert parse_target("sglang==0.5.23.post1").profile.label == "0.5.23"
    rc = parse_target("sglang==0.5.22rc1")
    assert rc.profile.label == "0.5.21" and rc.release == Version("0.5.22rc1")
    assert [f.code for f in rc.findings] == ["TARGET_PROFILE_NEAREST"]


def test_plan_reads_targets_with_the_same_grammar():
    from bringup.core.planner import parse_target as plan_target
    from bringup.core.rules.profiles import NEWEST

    for text in ("embedded", "bringup", "sglang==0.5.23", "sglang==0.5.23.post1", "sglang==0.5.22rc1"):
        t = parse_target(text)
        assert plan_target(text)[0] == t.engine
    assert plan_target("sglang==0.5.23.post1") == ("sglang", Version("0.5.23.post1"))
    assert plan_target("sglang") == ("sglang", NEWEST.release)
    for bad in ("vllm==1.0", "sglang==latest"):
        with pytest.raises(UserError):
            plan_target(bad)
        with pytest.raises(UserError):
            parse_target(bad)
