"""Shared helpers for the rules tests: the real configs in ../shared/models, read in place."""

from __future__ import annotations

import functools
from pathlib import Path

from repo_paths import SHARED_MODELS

MODELS = SHARED_MODELS
NANO = "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"
NANO_ATTENTION = [5, 12, 19, 26, 33, 42]  # EXPECTED.md
LFM2 = "LiquidAI__LFM2-2.6B.json"
LFM2_ATTENTION = [2, 5, 9, 13, 17, 21, 24, 27]
QWEN3_NEXT = "Qwen__Qwen3-Next-80B-A3B-Instruct.json"
QWEN3_NEXT_ATTENTION = [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47]


@functools.lru_cache(maxsize=None)
def layer_map(name: str, pp: int = 1):
    from bringup.core.sources.resolve import load_layer_map

    return load_layer_map(str(MODELS / name), pp=pp)


def run(name: str, target: str, **settings):
    from bringup.core.rules import LaunchSettings
    from bringup.core.validate import validate

    return validate(layer_map(name), target, LaunchSettings(**settings))


def codes(result, severity: str | None = None) -> list[str]:
    return [f.code for f in result.findings if severity is None or f.severity == severity]


def finding(result, code: str):
    matches = [f for f in result.findings if f.code == code]
    assert matches, f"no {code} in {codes(result)}"
    return matches[0]
