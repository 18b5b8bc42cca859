"""Byte sizes for people: parse '80GiB' / '141G' / '2.5e9', print '46.81 MiB'."""

from __future__ import annotations

import re

from bringup.core.errors import UserError

_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2, "gi": 1024**3, "gib": 1024**3, "ti": 1024**4, "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str | int | float) -> int:
    """Bytes from '80GiB', '141G' (decimal, as GPU vendors quote), '512MiB', '1.5e9' or a plain number."""
    if isinstance(text, (int, float)):
        value = int(text)
    else:
        match = _SIZE.match(str(text))
        unit = match.group(2).lower() if match else None
        if not match or unit not in _UNITS:
            raise UserError(f"cannot read the size {text!r}; write bytes or a number with a unit, e.g. 80GiB, 141G, 512MiB")
        value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise UserError(f"a memory size must be positive, got {text!r}")
    return value


def format_bytes(n: float, *, short: bool = False) -> str:
    """Binary units, two decimals: 49082368 -> '46.81 MiB' (reports); `short`: three significant
    figures, '46.8 MiB', '1 KiB' (labels and tooltips)."""
    n = float(n)
    if abs(n) < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.3g} {unit}" if short else f"{n:.2f} {unit}"
    raise AssertionError("unreachable")
