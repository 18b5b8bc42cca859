"""The validator against vLLM's own argument handling: the committed oracle table
(tests/data/oracle/vllm-<ver>.jsonl, written by tools/oracle/matrix.py vllm from the release's `vllm serve`
parser, create_engine_config and block-size alignment on a faked device) says what the release did with
each launch; `bringup validate --engine vllm` must say the same, cell by cell, except the limits
tools/oracle/vllm_limits.py explains. Runs on CPU in seconds: no engine is imported."""

from __future__ import annotations

import pytest

from oracle_tables import MEMORY, missing_extras, model as _model, rows as _rows, tables, unexplained

import cells  # noqa: E402  (tools/oracle, put on the path by oracle_tables)
import vllm_cells  # noqa: E402
import vllm_limits  # noqa: E402

TABLES = tables("vllm")


def _validate(version: str, key: vllm_cells.CellKey):
    from bringup.core.rules.targets import parse_target
    from bringup.core.validate import validate

    layer_map, hybrid = _model(key.model)
    result = validate(layer_map, parse_target(f"vllm=={version}"), vllm_cells.settings_for(key),
                      model_path="/oracle/model")
    return result, vllm_cells.predicted(result, MEMORY[key.device], key), hybrid


def test_the_release_the_rules_were_read_from_has_a_table():
    from bringup.core.rules.vllm_facts import READ_VERSION

    assert str(READ_VERSION) in {p.stem.split("-", 1)[1] for p in TABLES}


def _judged(version: str, path):
    for row in _rows(path):
        key = vllm_cells.CellKey.parse(row["id"])
        _result, pred, hybrid = _validate(version, key)
        diffs = vllm_cells.disagreements(pred, row["engine"], hybrid)
        yield row["id"], diffs, vllm_limits.explain(key, row["engine"], pred, diffs)


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_validator_agrees_with_the_release(path):
    version = path.stem.split("-", 1)[1]
    wrong, stale = unexplained(_judged(version, path))
    assert not wrong, f"{len(wrong)} cells where validate and vllm {version} disagree:\n" + "\n".join(wrong[:40])
    assert not stale, "\n".join(stale[:40])


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_launch_arguments_are_those_the_release_parsed(path):
    """Every cell the rules call OK: the argv core/launch/vllm.py makes now (Validate's Command section; for
    the "run" cells the Run tab's, with --host and --port) is the one the release's parser accepted into the
    recorded settings."""
    version = path.stem.split("-", 1)[1]
    checked = 0
    for row in _rows(path):
        key = vllm_cells.CellKey.parse(row["id"])
        result, pred, hybrid = _validate(version, key)
        if not result.ok:
            continue
        assert vllm_cells.table_argv(cells.launch_argv(result, key, version)[2:]) == row["argv"], \
            f"{row['id']}: the launch builder changed since the oracle ran"
        diffs = vllm_cells.disagreements(pred, row["engine"], hybrid)
        if vllm_limits.explain(key, row["engine"], pred, diffs) is None:
            assert row["engine"]["accepted"], f"{row['id']}: {row['argv']!r} refused by vllm {version}: {row['engine']}"
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_every_kind_of_cell_ran_in_every_release(path):
    """Each release's table holds every extra of the matrix (the Run tab's line among them), so a flag one
    builder can write has met that release's parser."""
    assert not missing_extras(path, vllm_cells)


def test_a_run_tab_flag_parsed_otherwise_is_a_disagreement():
    """The Run tab's --host as the release read it is compared, not only its acceptance."""
    path = TABLES[0]
    row = next(r for r in _rows(path) if r["id"].endswith("|run") and r["engine"]["accepted"])
    version = path.stem.split("-", 1)[1]
    key = vllm_cells.CellKey.parse(row["id"])
    _result, pred, hybrid = _validate(version, key)
    assert vllm_cells.disagreements(pred, row["engine"], hybrid) == []
    moved = {**row["engine"], "parsed": {**row["engine"]["parsed"], "host": "0.0.0.0"}}
    assert vllm_cells.disagreements(pred, moved, hybrid) == ["host: engine parsed '0.0.0.0', builder meant '127.0.0.1'"]
