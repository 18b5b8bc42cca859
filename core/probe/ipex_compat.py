"""Whether intel-extension-for-pytorch can work with the installed torch, said in words.

Each IPEX release is built for one torch minor version and refuses any other at import (2.8.x wants
torch 2.8.x). Its last release is 2.8, and upstream torch carries XPU support itself, so with a
current torch the honest advice is to remove IPEX, not to debug its import error."""

from __future__ import annotations

from bringup.core.versions import release


def _minor(version: str) -> tuple[int, int] | None:
    try:
        parts = release(version).release  # '2.8.10+xpu' -> (2, 8, 10)
    except ValueError:
        return None
    return (parts[0], parts[1]) if len(parts) >= 2 else None


def ipex_mismatch(ipex_version: str | None, torch_version: str | None) -> str:
    """'' when IPEX is absent or matches torch; otherwise the incompatibility and what to do."""
    if not ipex_version or not torch_version:
        return ""
    ipex, torch = _minor(ipex_version), _minor(torch_version)
    if ipex is None or torch is None or ipex == torch:
        return ""
    return (f"intel-extension-for-pytorch {ipex_version} is built for torch {ipex[0]}.{ipex[1]}.x and will not "
            f"load with torch {torch_version}; nothing here needs it (torch {torch_version} carries XPU support "
            "itself): remove it with `pip uninstall intel-extension-for-pytorch`")
