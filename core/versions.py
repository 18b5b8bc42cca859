"""Versions as installed (package metadata), read without importing the packages: the About box and
`bringup --version` say what is really there, and asking never loads torch."""

from __future__ import annotations

import platform
from importlib import metadata

DISTRIBUTION = "bringup-workbench"


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def bringup_version() -> str:
    """This package's installed version; 'unknown (not installed)' when run from a bare checkout."""
    return package_version(DISTRIBUTION) or "unknown (not installed: pip install -e .)"


def stack_versions() -> list[tuple[str, str]]:
    """(name, version) of what the workbench runs on, installed or not."""
    rows = [("bringup-workbench", bringup_version()), ("Python", platform.python_version())]
    for name in ("PySide6-Essentials", "pyqtgraph", "torch", "transformers", "triton", "flash-linear-attention", "sglang"):
        rows.append((name, package_version(name) or "not installed"))
    return rows
