"""SGLang rule profiles, one per release from 0.5.17 on: what the rules, the planner and diagnosis
need to know about that release, each fact with the file and line of the release's source.

The values live in `sglang_releases.py` and are written by the maintainer script
`tools/sglang_facts.py` from the released wheel (`pip download --no-deps sglang==X`), so adding a
release is a reviewed diff. A version between two profiles uses the nearest earlier one, a version
newer than the newest profile uses the newest (and says so), and a version older than the oldest
profile is refused rather than guessed.
"""

from __future__ import annotations

from packaging.version import Version

from bringup.core.rules.sglang_profile import FACTS, SglangProfile
from bringup.core.rules.sglang_releases import NEWEST, OLDEST, PROFILES
from bringup.core.versions import release

__all__ = ["FACTS", "NEWEST", "OLDEST", "PROFILES", "SglangProfile", "profile_for", "versions_where"]


def versions_where(predicate) -> str:
    """The profiled releases where `predicate(profile)` holds, said as a range or a list
    ("0.5.18 or 0.5.19", "0.5.20 and later", "0.5.17 only")."""
    hits = [p for p in PROFILES if predicate(p)]
    if not hits:
        return "no profiled release"
    labels = [p.label for p in hits]
    if hits[-1] is PROFILES[-1] and len(hits) > 1 and PROFILES[PROFILES.index(hits[0]):] == tuple(hits):
        return f"{labels[0]} and later"
    if len(hits) == 1:
        return f"{labels[0]} only" if hits[0] is not PROFILES[-1] else f"{labels[0]} and later"
    if PROFILES[PROFILES.index(hits[0]):PROFILES.index(hits[-1]) + 1] == tuple(hits):
        return " or ".join(labels) if len(hits) == 2 else f"{labels[0]} to {labels[-1]}"
    return ", ".join(labels[:-1]) + " or " + labels[-1]


def profile_for(version) -> SglangProfile | None:
    """The profile of the nearest release at or before `version` (a Version, or anything
    core.versions.release reads; 0.5.20rc1 comes before 0.5.20), or None when it predates them all."""
    version = version if isinstance(version, Version) else release(version)
    earlier = [p for p in PROFILES if p.release <= version]
    return earlier[-1] if earlier else None
