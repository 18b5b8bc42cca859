"""The validator against the engines' own argument handling: the committed oracle tables
(tests/data/oracle/, written by tools/oracle/matrix.py from each SGLang release's ServerArgs on a faked
device) say what each release did with each launch; `bringup validate` must say the same, cell by cell,
except the limits tools/oracle/limits.py explains. Runs on CPU in seconds: no engine is imported."""

from __future__ import annotations

import pytest

from oracle_tables import MEMORY, missing_extras, model as _model, rows as _rows, tables, unexplained

import cells  # noqa: E402  (tools/oracle, put on the path by oracle_tables)
import limits  # noqa: E402

TABLES = tables("sglang")


def _validate(version: str, key: cells.CellKey):
    from bringup.core.rules.targets import parse_target
    from bringup.core.validate import validate

    layer_map, hybrid = _model(key.model)
    target = parse_target(f"sglang=={version}")
    result = validate(layer_map, target, cells.settings_for(key), model_path="/oracle/model")
    return result, cells.predicted(result, target.profile, MEMORY[key.device], key), hybrid


def test_every_supported_release_has_a_table():
    from bringup.core.rules.profiles import PROFILES

    have = {p.stem.split("-", 1)[1] for p in TABLES}
    assert {p.label for p in PROFILES} <= have | set(limits.RELEASES_NOT_RUN), sorted(have)


def test_fake_memory_matches_the_oracle_targets():
    import fake_device

    assert MEMORY == {k: (None if k == "cpu" else d.memory_mib) for k, d in fake_device.TARGETS.items()}


def _judged(version: str, path):
    for row in _rows(path):
        key = cells.CellKey.parse(row["id"])
        _result, pred, hybrid = _validate(version, key)
        diffs = cells.disagreements(pred, row["engine"], hybrid)
        yield row["id"], diffs, limits.explain(version, key, row["engine"], pred, diffs)


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_validator_agrees_with_the_release(path):
    version = path.stem.split("-", 1)[1]
    wrong, stale = unexplained(_judged(version, path))
    assert not wrong, f"{len(wrong)} cells where validate and sglang {version} disagree:\n" + "\n".join(wrong[:40])
    assert not stale, "\n".join(stale[:40])


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_launch_arguments_are_those_the_release_parsed(path):
    """Every cell the rules call OK: the argv core/launch/sglang.py builds now (Validate's Command section; for
    the "run" cells the Run tab's, with --host, --port, --enable-metrics and the layer dump) is the one the
    release's parser accepted into the recorded settings."""
    version = path.stem.split("-", 1)[1]
    checked = 0
    for row in _rows(path):
        key = cells.CellKey.parse(row["id"])
        result, pred, _hybrid = _validate(version, key)
        if not result.ok:
            continue
        argv = cells.launch_argv(result, key, version)[3:]
        assert cells.table_argv(argv) == row["argv"], f"{row['id']}: the launch builder changed since the oracle ran"
        if limits.explain(version, key, row["engine"], pred, cells.disagreements(pred, row["engine"], _hybrid)) is None:
            assert row["engine"]["accepted"], f"{row['id']}: {row['argv']!r} refused by sglang {version}: {row['engine']}"
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_every_kind_of_cell_ran_in_every_release(path):
    """Each release's table holds every extra of the matrix (the Run tab's line among them), so a flag one
    builder can write has met that release's parser."""
    assert not missing_extras(path, cells)


def test_a_run_tab_flag_parsed_otherwise_is_a_disagreement():
    """The Run tab's --port as the release read it is compared, not only its acceptance."""
    path = TABLES[-1]
    row = next(r for r in _rows(path) if r["id"].endswith("|run") and r["engine"]["accepted"])
    version = path.stem.split("-", 1)[1]
    key = cells.CellKey.parse(row["id"])
    _result, pred, hybrid = _validate(version, key)
    assert cells.disagreements(pred, row["engine"], hybrid) == []
    moved = {**row["engine"], "parsed": {**row["engine"]["parsed"], "port": 30001}}
    assert cells.disagreements(pred, moved, hybrid) == ["port: engine parsed 30001, builder meant 30000"]
