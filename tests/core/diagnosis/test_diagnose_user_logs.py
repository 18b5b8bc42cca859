"""The collected users' crash logs (tests/data/logs/users/, links in manifest.json) are read as the
manifest says: a failure found in each (none called clean), its class, the layers it names, the stage."""

from __future__ import annotations

import json

import pytest

from bringup.core.diagnosis import diagnose
from repo_paths import DATA

USERS = DATA / "logs" / "users"
MANIFEST = json.loads((USERS / "manifest.json").read_text())


def test_the_collection_is_large_and_each_log_has_its_source():
    assert len(MANIFEST) >= 60
    assert all(e["source"].startswith("https://github.com/") for e in MANIFEST)
    assert {e["split"] for e in MANIFEST} == {"train", "heldout"}
    assert sum(e["split"] == "heldout" for e in MANIFEST) >= len(MANIFEST) // 4


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["file"] for e in MANIFEST])
def test_user_log_is_read_as_the_manifest_says(entry):
    result = diagnose((USERS / entry["file"]).read_text())
    reading = result.reading
    assert not result.ok, "a failing log was called clean"
    assert reading.failed
    if entry["class"] is not None:
        assert reading.classes and reading.classes[0].name == entry["class"], [g.name for g in reading.classes]
    assert set(entry["layers"]) <= set(reading.named_layers)
    if entry["stage"] is not None:
        assert reading.stage == entry["stage"], reading.stage_why
    assert any(f.severity == "error" for f in result.findings) or reading.failure.kind == "wrapper"
