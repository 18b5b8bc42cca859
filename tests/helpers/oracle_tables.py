"""What the oracle-table tests (tests/tools/test_oracle_table.py, test_oracle_vllm_table.py) share: the
committed tables, the shared configs they name, and the device memory the oracle faked."""

from __future__ import annotations

import json
import sys
from functools import lru_cache

from repo_paths import REPO, SHARED_MODELS

sys.path.insert(0, str(REPO / "tools" / "oracle"))

TABLES = REPO / "tests" / "data" / "oracle"
# MiB of each oracle target (tools/oracle/fake_device.py TARGETS; the cpu is the host, not compared)
MEMORY = {"cuda-hopper": 81559, "cuda-blackwell": 183359, "rocm": 196592, "xpu": 65536, "npu": 65536, "cpu": None}


def tables(engine: str) -> list:
    return sorted(TABLES.glob(f"{engine}-*.jsonl"))


def missing_extras(path, cells) -> list[str]:
    """The matrix's cell kinds (`cells.EXTRAS`, the plain cell "" among them) a table holds no row of."""
    ran = {cells.CellKey.parse(row["id"]).extra for row in rows(path)}
    return sorted((set(cells.EXTRAS) | {""}) - ran)


@lru_cache(maxsize=None)
def model(name: str):
    """(layer map, whether it keeps recurrent state) of a config under ../shared/models."""
    from bringup.core.rules.model_facts import facts_for_pp
    from bringup.core.sources.resolve import load_layer_map

    layer_map = load_layer_map(str(SHARED_MODELS / f"{name}.json"))
    return layer_map, facts_for_pp(layer_map, 1).is_hybrid


def rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def unexplained(judged) -> tuple[list[str], list[str]]:
    """From (cell id, disagreements, the limit explaining them or None) of each cell: the cells that
    disagree with no limit, and the cells listed as a limit that now agree (so the list cannot rot)."""
    wrong, stale = [], []
    for cell, diffs, why in judged:
        if diffs and why is None:
            wrong.append(f"{cell}: " + "; ".join(diffs))
        if why is not None and not diffs:
            stale.append(f"{cell}: listed as a limit ({why[:60]}...) but now agrees")
    return wrong, stale
