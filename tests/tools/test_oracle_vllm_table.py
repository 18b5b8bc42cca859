"""The validator against vLLM's own argument handling: the committed oracle table
(tests/data/oracle/vllm-<ver>.jsonl, written by tools/oracle/matrix.py vllm from the release's `vllm serve`
parser, create_engine_config and block-size alignment on a faked device) says what the release did with
each launch; `bringup validate --engine vllm` must say the same, cell by cell, except the limits
tools/oracle/vllm_limits.py explains. Runs on CPU in seconds: no engine is imported."""

from __future__ import annotations

import json
import sys
from functools import lru_cache

import pytest

from repo_paths import REPO, SHARED_MODELS

sys.path.insert(0, str(REPO / "tools" / "oracle"))
import vllm_cells  # noqa: E402
import vllm_limits  # noqa: E402

TABLES = sorted((REPO / "tests" / "data" / "oracle").glob("vllm-*.jsonl"))
MEMORY = {"cuda-hopper": 81559, "cuda-blackwell": 183359, "rocm": 196592, "xpu": 65536, "npu": 65536, "cpu": None}


@lru_cache(maxsize=None)
def _model(name: str):
    from bringup.core.rules.model_facts import facts_for_pp
    from bringup.core.sources.resolve import load_layer_map

    layer_map = load_layer_map(str(SHARED_MODELS / f"{name}.json"))
    return layer_map, facts_for_pp(layer_map, 1).is_hybrid


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _validate(version: str, key: vllm_cells.CellKey):
    from bringup.core.rules.targets import parse_target
    from bringup.core.validate import validate

    layer_map, hybrid = _model(key.model)
    result = validate(layer_map, parse_target(f"vllm=={version}"), vllm_cells.settings_for(key),
                      model_path="/oracle/model")
    return result, vllm_cells.predicted(result, MEMORY[key.device]), hybrid


def test_the_release_the_rules_were_read_from_has_a_table():
    from bringup.core.rules.vllm_facts import READ_VERSION

    assert str(READ_VERSION) in {p.stem.split("-", 1)[1] for p in TABLES}


def test_fake_memory_matches_the_oracle_targets():
    import fake_device

    assert MEMORY == {k: (None if k == "cpu" else d.memory_mib) for k, d in fake_device.TARGETS.items()}


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_validator_agrees_with_the_release(path):
    version = path.stem.split("-", 1)[1]
    wrong, stale = [], []
    for row in _rows(path):
        key = vllm_cells.CellKey.parse(row["id"])
        _result, pred, hybrid = _validate(version, key)
        diffs = vllm_cells.disagreements(pred, row["engine"], hybrid)
        why = vllm_limits.explain(key, row["engine"], pred, diffs)
        if diffs and why is None:
            wrong.append(f"{row['id']}: " + "; ".join(diffs))
        if why is not None and not diffs:
            stale.append(f"{row['id']}: listed as a limit ({why[:60]}...) but now agrees")
    assert not wrong, f"{len(wrong)} cells where validate and vllm {version} disagree:\n" + "\n".join(wrong[:40])
    assert not stale, "\n".join(stale[:40])


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_launch_arguments_are_those_the_release_parsed(path):
    """Every cell the rules call OK: the argv core/launch/vllm.py (the Run tab's builder) makes now is the
    one the release's parser accepted into the recorded settings."""
    version = path.stem.split("-", 1)[1]
    checked = 0
    for row in _rows(path):
        key = vllm_cells.CellKey.parse(row["id"])
        result, pred, hybrid = _validate(version, key)
        if not result.ok:
            continue
        assert vllm_cells.table_argv(result.argv[2:]) == row["argv"], \
            f"{row['id']}: the launch builder changed since the oracle ran"
        diffs = vllm_cells.disagreements(pred, row["engine"], hybrid)
        if vllm_limits.explain(key, row["engine"], pred, diffs) is None:
            assert row["engine"]["accepted"], f"{row['id']}: {row['argv']!r} refused by vllm {version}: {row['engine']}"
            checked += 1
    assert checked > 0
