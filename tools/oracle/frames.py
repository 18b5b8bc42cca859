"""Where an engine's exception came from: the innermost frame inside its package, as file:line in the wheel."""

from __future__ import annotations

import traceback


def innermost(exc: BaseException, package: str, shown: str) -> str:
    """`package`: the folder name in site-packages ("sglang"); `shown`: the prefix the wheel's source uses."""
    marker = f"/{package}/"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if marker in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"{shown}{f.filename.split(marker, 1)[1]}:{f.lineno}"
