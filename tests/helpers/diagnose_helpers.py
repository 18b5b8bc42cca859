"""Shared pieces for the diagnosis tests: the hand-written logs under tests/data/logs/."""

from __future__ import annotations

from pathlib import Path

from repo_paths import DATA

LOGS = DATA / "logs"


def read(name: str) -> str:
    return (LOGS / name).read_text()


def diagnose_file(name: str, layer_map=None):
    from bringup.core.diagnosis import diagnose

    return diagnose(read(name), layer_map)


def codes(result) -> list[str]:
    return [f.code for f in result.findings]
