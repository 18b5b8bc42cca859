"""Targets: `embedded` (our engine), `sglang==X.Y.Z` (SGLang, by its rule profile for that release) or
`vllm==X.Y.Z` (vLLM, by the facts read from its release: core/rules/vllm_facts.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bringup.core.errors import UserError
from bringup.core.finding import Finding
from bringup.core.rules.profiles import NEWEST, OLDEST, PROFILES, SglangProfile, profile_for

# What is known about releases between profiles, from sources other than their own code.
_BETWEEN = {
    (0, 5, 20): "A third-party XPU patch note (exl3 for SGLang) says 0.5.20 already refuses extra_buffer on XPU, as "
                "0.5.21 does: check against sglang==0.5.21 as well.",
}
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.?(?:post|rc|dev)\d*)?$")


@dataclass(frozen=True)
class Target:
    engine: str  # "embedded" | "sglang" | "vllm"
    version: str | None = None  # the version the user named (sglang)
    profile: SglangProfile | None = None  # the rule profile applied (sglang)
    findings: tuple[Finding, ...] = ()  # e.g. "0.5.20 uses the rules of 0.5.19"

    @property
    def label(self) -> str:
        return "embedded" if self.engine == "embedded" else f"{self.engine}=={self.version}"

    def to_json(self) -> dict:
        out = {"engine": self.engine, "label": self.label}
        if self.version:
            out["version"] = self.version
        if self.profile:
            out["profile"] = self.profile.to_json()
        return out


def known_targets() -> list[str]:
    return ["embedded"] + [f"sglang=={p.label}" for p in PROFILES]


def vllm_targets() -> list[str]:
    """The vLLM release whose rules were read (`bringup validate --target vllm==X.Y.Z`)."""
    from bringup.core.rules.vllm_target import read_label

    return [f"vllm=={read_label()}"]


def read_target(text: str) -> tuple[str, str | None, tuple[int, int, int] | None]:
    """The target grammar, for every command: 'embedded' (or 'bringup') -> ("embedded", None, None);
    'sglang' -> ("sglang", None, None); 'sglang==0.5.19' (also .post1, rc1...) -> ("sglang", "0.5.19", (0, 5, 19))."""
    raw = (text or "").strip()
    if raw.lower() in ("embedded", "bringup"):
        return "embedded", None, None
    name, sep, version = raw.partition("==")
    engine = name.strip().lower()
    if engine not in ("sglang", "vllm"):
        raise UserError(f"unknown target {text!r}; use 'embedded', 'sglang==X.Y.Z' (rule profiles: "
                        f"{', '.join(p.label for p in PROFILES)}) or 'vllm==X.Y.Z'")
    if not sep:
        return engine, None, None
    match = _VERSION.match(version.strip())
    if not match:
        raise UserError(f"target version {version!r} is not a release number like 0.5.19; use {engine}==X.Y.Z")
    return engine, version.strip(), tuple(int(g) for g in match.groups())


def parse_target(text: str) -> Target:
    """'embedded', 'sglang==0.5.19' (also 'sglang' alone: the newest profile), with its rule profile."""
    engine, version, numbers = read_target(text)
    if engine == "embedded":
        return Target("embedded")
    if engine == "vllm":
        from bringup.core.rules.vllm_target import vllm_target

        return vllm_target(version, numbers)
    if version is None:
        note = Finding.check("TARGET_VERSION_ASSUMED", "info",
                       f"No SGLang version given; the rules of the newest profile ({NEWEST.label}) are used.",
                       fix=f"name the release you will run, e.g. --target sglang=={NEWEST.label}", source="core/rules/profiles.py")
        return Target("sglang", NEWEST.label, NEWEST, (note,))
    profile = profile_for(numbers)
    if profile is None:
        raise UserError(f"sglang {version} is older than the oldest rule profile ({OLDEST.label}); its rules were never "
                        f"read, so they are not guessed. Validate against sglang=={OLDEST.label} or newer")
    findings = ()
    if profile.version != numbers:
        newer = numbers > NEWEST.version
        findings = (Finding.check(
            "TARGET_PROFILE_NEAREST", "warning" if newer else "info",
            f"There is no rule profile for sglang {version}; the nearest earlier one, {profile.label}, is used. "
            + ("Releases after it may have changed rules and messages that this check does not know."
               if newer else "Rules that changed between those releases are not known here.")
            + (" " + _BETWEEN[numbers] if numbers in _BETWEEN else ""),
            fix=f"compare with sglang=={profile.label}'s release notes", source="core/rules/profiles.py"),)
    return Target("sglang", version, profile, findings)
