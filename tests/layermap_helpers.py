"""Shared helpers of the layer-map tests: where the real configs live and what EXPECTED.md says."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

SHARED_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
REPO = Path(__file__).resolve().parents[1]


def shared_config(file_name: str) -> dict:
    return json.loads((SHARED_MODELS / file_name).read_text())


def shared_files() -> list[Path]:
    return sorted(SHARED_MODELS.glob("*.json"))


@dataclass
class Expected:
    file: str
    model_type: str
    layers: int
    full_attention: list[int] | None  # None = "all"
    full_count: int
    sliding: list[int]
    state: int


def _ids(cell: str, layers: int) -> tuple[int, list[int] | None]:
    cell = cell.strip()
    if cell == "none":
        return 0, []
    m = re.fullmatch(r"all (\d+)", cell)
    if m:
        return int(m[1]), None
    m = re.fullmatch(r"(\d+): \[([\d, ]*)\]", cell)
    assert m, f"cannot read EXPECTED.md cell {cell!r}"
    ids = [int(x) for x in m[2].split(",")]
    assert len(ids) == int(m[1])
    return int(m[1]), ids


def expected_table() -> dict[str, Expected]:
    """Rows of the golden table in EXPECTED.md, keyed by file name."""
    rows = {}
    for line in (SHARED_MODELS / "EXPECTED.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not cells[0].startswith("`"):
            continue
        file, model_type, layers = cells[0].strip("`"), cells[1], int(cells[2])
        full_count, full = _ids(cells[3], layers)
        _, sliding = _ids(cells[4], layers)
        rows[file] = Expected(file, model_type, layers, full, full_count, sliding or [], int(cells[5]))
    return rows
