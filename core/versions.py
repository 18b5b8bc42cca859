"""Versions: as installed (package metadata, read without importing the packages: the About box and
`bringup --version` say what is really there, and asking never loads torch), and as people write
them (`release`: one type for every engine release the project reasons about, packaging's Version,
so 0.19.0rc1 < 0.19.0 < 0.19.0.post1 < 0.20.0 as PEP 440 orders them)."""

from __future__ import annotations

import platform
from importlib import metadata

from packaging.version import InvalidVersion, Version

DISTRIBUTION = "bringup-workbench"


def release(text: str | tuple[int, ...]) -> Version:
    """'0.5.19', '0.19.0rc1', '2.8.0+cpu' or (0, 5, 19) as a Version; ValueError when it is none."""
    if isinstance(text, tuple):
        text = ".".join(map(str, text))
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise ValueError(f"{text!r} is not a version number") from None


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
