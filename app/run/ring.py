"""Fixed-size history for the live graphs: an hour at four samples a second, no growth."""

from __future__ import annotations

import numpy as np

HOUR_AT_4HZ = 4 * 3600


class RingSeries:
    """Named float series sharing one time axis; NaN marks "no data" (drawn as a gap)."""

    def __init__(self, names: list[str], capacity: int = HOUR_AT_4HZ) -> None:
        self.names = list(names)
        self.capacity = capacity
        self._t = np.full(capacity, np.nan)
        self._v = {n: np.full(capacity, np.nan) for n in names}
        self._next = 0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def append(self, t: float, values: dict[str, float | None]) -> None:
        i = self._next
        self._t[i] = t
        for name, arr in self._v.items():
            v = values.get(name)
            arr[i] = np.nan if v is None else float(v)
        self._next = (i + 1) % self.capacity
        self._count = min(self._count + 1, self.capacity)

    def _ordered(self, arr: np.ndarray) -> np.ndarray:
        if self._count < self.capacity:
            return arr[: self._count]
        return np.concatenate([arr[self._next:], arr[: self._next]])

    def times(self) -> np.ndarray:
        return self._ordered(self._t)

    def values(self, name: str) -> np.ndarray:
        return self._ordered(self._v[name])

    def has_data(self, name: str) -> bool:
        return bool(np.isfinite(self.values(name)).any())

    def last(self, name: str) -> float | None:
        vals = self.values(name)
        finite = vals[np.isfinite(vals)]
        return float(finite[-1]) if finite.size else None

    def clear(self) -> None:
        self._t[:] = np.nan
        for arr in self._v.values():
            arr[:] = np.nan
        self._next = self._count = 0

    def to_csv(self) -> str:
        """Time plus every series; empty cells where a series had no data."""
        lines = [",".join(["t_seconds", *self.names])]
        cols = [self.values(n) for n in self.names]
        for row, t in enumerate(self.times()):
            cells = [f"{t:.3f}"] + ["" if not np.isfinite(c[row]) else f"{c[row]:.6g}" for c in cols]
            lines.append(",".join(cells))
        return "\n".join(lines) + "\n"
