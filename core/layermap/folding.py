"""Folding a layer stack into repeated units, so a 118-block Nemotron-H reads as its unit times N.

`fold_layers` covers the stack, in order, with runs `unit x times`. Among all such coverings it
picks the one that is shortest to read: each run costs its unit length plus one, so a long unit
repeated many times is cheap and leftovers are grouped into one run rather than shown one by one.
A dynamic programme over positions finds it exactly; ties go to the shorter unit, then to more
repeats, so the result is deterministic.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from bringup.core.layermap.vocabulary import Fold, Layer

MAX_UNIT = 64  # longer units are not a useful summary


def _key(layer) -> tuple[str, str]:
    if isinstance(layer, Layer):
        return (layer.mixer, layer.ffn)
    mixer, ffn = layer  # a (mixer, ffn) pair
    return (mixer, ffn)


def _repeats(ids: Sequence[int], max_unit: int) -> list[list[int]]:
    """reps[L][i] = how many times ids[i:i+L] repeats back to back from i (0 where it doesn't fit)."""
    n = len(ids)
    reps: list[list[int]] = [[]]
    for size in range(1, max_unit + 1):
        # run[i] = length of the stretch from i where ids[j] == ids[j + size]
        run = [0] * (n + 1)
        for i in range(n - size - 1, -1, -1):
            run[i] = run[i + 1] + 1 if ids[i] == ids[i + size] else 0
        reps.append([1 + run[i] // size if i + size <= n else 0 for i in range(n)])
    return reps


def fold_layers(layers: Iterable) -> list[Fold]:
    keys = [_key(l) for l in layers]
    n = len(keys)
    if n == 0:
        return []
    vocab: dict[tuple[str, str], int] = {}
    ids = [vocab.setdefault(k, len(vocab)) for k in keys]
    max_unit = max(1, min(MAX_UNIT, n))
    reps = _repeats(ids, max_unit)
    INF = float("inf")
    cost = [INF] * n + [0]
    pick: list[tuple[int, int]] = [(0, 0)] * n  # (unit length, times) chosen at each position
    for i in range(n - 1, -1, -1):
        for size in range(1, min(max_unit, n - i) + 1):
            most = reps[size][i]
            for times in sorted({most, 1}, reverse=True):
                c = size + 1 + cost[i + size * times]
                if c < cost[i]:
                    cost[i], pick[i] = c, (size, times)
    folds, i = [], 0
    while i < n:
        size, times = pick[i]
        folds.append(Fold(start=i, unit=tuple(keys[i:i + size]), times=times))
        i += size * times
    return folds


def describe(folds: list[Fold], letter=None) -> str:
    """One line: `MEMEM*E x5 | ME x3 | ...` with `letter(mixer, ffn)` naming each layer."""
    letter = letter or (lambda m, f: f"{m}/{f}")
    parts = []
    for f in folds:
        unit = "".join(letter(m, ff) for m, ff in f.unit)
        parts.append(unit if f.times == 1 else f"{unit} x{f.times}")
    return " | ".join(parts)
