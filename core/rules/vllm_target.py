"""`vllm==X.Y.Z`: a vLLM target, checked with the facts read from one release (vllm_facts.py)."""

from __future__ import annotations

from bringup.core.errors import UserError
from bringup.core.finding import Finding
from bringup.core.rules.vllm_facts import READ_VERSION

# The hybrid KV cache manager with Mamba groups (the rules' subject) is vLLM v1's; releases before
# it have other rules, which were never read.
OLDEST = (0, 10, 0)


def read_label() -> str:
    return ".".join(map(str, READ_VERSION))


def vllm_target(version: str | None, numbers: tuple[int, int, int] | None):
    from bringup.core.rules.targets import Target

    label = read_label()
    if version is None:
        note = Finding.check("TARGET_VERSION_ASSUMED", "info",
                             f"No vLLM version given; the facts read from vLLM {label} are used.",
                             fix=f"name the release you will run, e.g. --target vllm=={label}",
                             source="core/rules/vllm_facts.py")
        return Target("vllm", label, None, (note,))
    if numbers < OLDEST:
        raise UserError(f"vllm {version} predates the hybrid KV cache manager these rules describe; its rules were "
                        f"never read. Validate against vllm=={label}, or for SGLang against sglang==X.Y.Z")
    findings = ()
    if numbers != READ_VERSION:
        findings = (Finding.check(
            "TARGET_PROFILE_NEAREST", "info" if numbers < READ_VERSION else "warning",
            f"The vLLM rules were read from {label}; {version} is checked with them, and rules that changed between "
            "the two releases are not known here.", fix=f"compare with vllm=={label}'s release notes",
            source="core/rules/vllm_facts.py"),)
    return Target("vllm", version, None, findings)
