#!/usr/bin/env python3
"""Counts over the committed oracle tables (SGLang's and vLLM's), as the closing note and README give them:
cells, agreements, explained limits (tools/oracle/limits.py and vllm_limits.py, by kind), cells whose validator error lies beyond the oracle's
reach (start-up, model load), and disagreements left.

    python tools/oracle/summary.py
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cells  # noqa: E402
import fake_device  # noqa: E402
import limits  # noqa: E402
import vllm_cells  # noqa: E402
import vllm_limits  # noqa: E402

TABLES = HERE.parent.parent / "tests" / "data" / "oracle"
MODELS = HERE.parent.parent.parent / "shared" / "models"


def _judge(engine: str, version: str, key, row, maps) -> tuple[dict, list[str], str | None]:
    """(the validator's prediction, the disagreements, the limit explaining them) of one committed cell."""
    from bringup.core.rules.model_facts import facts_for_pp
    from bringup.core.rules.targets import parse_target
    from bringup.core.sources.resolve import load_layer_map
    from bringup.core.validate import validate

    if key.model not in maps:
        lm = load_layer_map(str(MODELS / f"{key.model}.json"))
        maps[key.model] = (lm, facts_for_pp(lm, 1).is_hybrid)
    lm, hybrid = maps[key.model]
    target = parse_target(f"{engine}=={version}")
    table = vllm_cells if engine == "vllm" else cells
    result = validate(lm, target, table.settings_for(key), model_path="/oracle/model")
    memory = None if key.device == "cpu" else fake_device.TARGETS[key.device].memory_mib
    if engine == "vllm":
        pred = vllm_cells.predicted(result, memory, key)
        diffs = vllm_cells.disagreements(pred, row["engine"], hybrid)
        return pred, diffs, vllm_limits.explain(key, row["engine"], pred, diffs)
    pred = cells.predicted(result, target.profile, memory, key)
    diffs = cells.disagreements(pred, row["engine"], hybrid)
    return pred, diffs, limits.explain(version, key, row["engine"], pred, diffs)


def main() -> int:
    maps: dict = {}
    for engine in ("sglang", "vllm"):
        total = Counter()
        table = vllm_cells if engine == "vllm" else cells
        for path in sorted(TABLES.glob(f"{engine}-*.jsonl")):
            version = path.stem.split("-", 1)[1]
            n = Counter()
            kinds = Counter()
            for line in path.read_text().splitlines():
                row = json.loads(line)
                key = table.CellKey.parse(row["id"])
                pred, diffs, why = _judge(engine, version, key, row, maps)
                n["cells"] += 1
                if pred["first_error"] and pred["reachable_error"] is None:
                    n["beyond_reach"] += 1
                if not diffs:
                    n["agree"] += 1
                elif why:
                    n["limit"] += 1
                    kinds[why.split(":")[0][:70]] += 1
                else:
                    n["disagree"] += 1
            total.update(n)
            print(f"{engine} {version}: {n['cells']} cells, {n['agree']} agree ({n['beyond_reach']} with the "
                  f"validator's error beyond the oracle's reach), {n['limit']} explained limits, "
                  f"{n['disagree']} disagree")
            for k, c in kinds.most_common():
                print(f"    {c:4} {k}")
        print(f"all {engine}: {dict(total)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
