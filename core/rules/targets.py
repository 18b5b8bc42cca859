"""Targets: `embedded` (our engine), `sglang==X.Y.Z` (SGLang, by its rule profile for that release) or
`vllm==X.Y.Z` (vLLM, by the facts read from its release: core/rules/vllm_facts.py).

Release numbers are PEP 440 versions (core.versions.release): 0.5.19.post1 uses 0.5.19's profile, and
a release candidate comes before its release (0.19.0rc1 is checked as a 0.19 release, not a newer one).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from bringup.core.errors import UserError
from bringup.core.finding import Finding
from bringup.core.rules.profiles import NEWEST, OLDEST, PROFILES, SglangProfile, profile_for
from bringup.core.rules.vllm_facts import READ_VERSION
from bringup.core.versions import release

# What is known about releases between profiles, from sources other than their own code.
_BETWEEN = {
    (0, 5, 20): "A third-party XPU patch note (exl3 for SGLang) says 0.5.20 already refuses extra_buffer on XPU, as "
                "0.5.21 does: check against sglang==0.5.21 as well.",
}
# The hybrid KV cache manager with Mamba groups (the vLLM rules' subject) is vLLM v1's; releases before
# it have other rules, which were never read.
VLLM_OLDEST = release("0.10.0")


@dataclass(frozen=True)
class Target:
    engine: str  # "embedded" | "sglang" | "vllm"
    version: str | None = None  # the version as the user named it
    profile: SglangProfile | None = None  # the rule profile applied (sglang)
    findings: tuple[Finding, ...] = ()  # e.g. "0.5.20 uses the rules of 0.5.19"
    release: Version | None = None  # `version` parsed: what the rules compare


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
    return [f"vllm=={READ_VERSION}"]


def read_target(text: str) -> tuple[str, str | None, Version | None]:
    """The target grammar, for every command: 'embedded' (or 'bringup') -> ("embedded", None, None);
    'sglang' -> ("sglang", None, None); 'sglang==0.5.19' (also .post1, rc1...) -> ("sglang", "0.5.19", Version)."""
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
    try:
        parsed = release(version)
    except ValueError:
        parsed = None
    if parsed is None or len(parsed.release) != 3 or parsed.local or parsed.epoch:
        raise UserError(f"target version {version!r} is not a release number like 0.5.19; use {engine}==X.Y.Z")
    return engine, version.strip(), parsed


def parse_target(text: str) -> Target:
    """'embedded', 'sglang==0.5.19' (also 'sglang' alone: the newest profile), with its rule profile."""
    engine, version, numbers = read_target(text)
    if engine == "embedded":
        return Target("embedded")
    if engine == "vllm":
        return _vllm_target(version, numbers)
    if version is None:
        note = Finding.check("TARGET_VERSION_ASSUMED", "info",
                       f"No SGLang version given; the rules of the newest profile ({NEWEST.label}) are used.",
                       fix=f"name the release you will run, e.g. --target sglang=={NEWEST.label}", source="core/rules/profiles.py")
        return Target("sglang", NEWEST.label, NEWEST, (note,), NEWEST.release)
    profile = profile_for(numbers)
    if profile is None:
        raise UserError(f"sglang {version} is older than the oldest rule profile ({OLDEST.label}); its rules were never "
                        f"read, so they are not guessed. Validate against sglang=={OLDEST.label} or newer")
    findings = ()
    if profile.release != numbers:
        newer = numbers > NEWEST.release
        findings = (Finding.check(
            "TARGET_PROFILE_NEAREST", "warning" if newer else "info",
            f"There is no rule profile for sglang {version}; the nearest earlier one, {profile.label}, is used. "
            + ("Releases after it may have changed rules and messages that this check does not know."
               if newer else "Rules that changed between those releases are not known here.")
            + (" " + _BETWEEN[numbers.release] if numbers.release in _BETWEEN else ""),
            fix=f"compare with sglang=={profile.label}'s release notes", source="core/rules/profiles.py"),)
    return Target("sglang", version, profile, findings, numbers)


def _vllm_target(version: str | None, numbers: Version | None) -> Target:
    if version is None:
        note = Finding.check("TARGET_VERSION_ASSUMED", "info",
                             f"No vLLM version given; the facts read from vLLM {READ_VERSION} are used.",
                             fix=f"name the release you will run, e.g. --target vllm=={READ_VERSION}",
                             source="core/rules/vllm_facts.py")
        return Target("vllm", str(READ_VERSION), None, (note,), READ_VERSION)
    if numbers < VLLM_OLDEST:
        raise UserError(f"vllm {version} predates the hybrid KV cache manager these rules describe; its rules were "
                        f"never read. Validate against vllm=={READ_VERSION}, or for SGLang against sglang==X.Y.Z")
    findings = ()
    if numbers != READ_VERSION:
        findings = (Finding.check(
            "TARGET_PROFILE_NEAREST", "info" if numbers < READ_VERSION else "warning",
            f"The vLLM rules were read from {READ_VERSION}; {version} is checked with them, and rules that changed "
            "between the two releases are not known here.", fix=f"compare with vllm=={READ_VERSION}'s release notes",
            source="core/rules/vllm_facts.py"),)
    return Target("vllm", version, None, findings, numbers)
