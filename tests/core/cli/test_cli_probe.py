"""`bringup probe`: human text, JSON, and a crash simulated through the environment."""

from __future__ import annotations

import json

from bringup.cli import main as cli


def test_probe_json_and_text(capsys):
    assert cli(["probe", "--json", "--steps", "python,packages,cpu"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in doc["steps"]] == ["python", "packages", "cpu"] and doc["devices"]["cpu"]["available"]
    assert cli(["probe", "--steps", "python,cpu"]) == 0
    out = capsys.readouterr().out
    assert "Libraries" in out and "Runtime" in out and "Devices" in out


def test_probe_crash_from_environment(capsys, monkeypatch):
    monkeypatch.setenv("BRINGUP_PROBE_SIMULATE", "crash:cpu")
    assert cli(["probe", "--steps", "python,cpu"]) == 1
    out = capsys.readouterr().out
    assert "CRASHED" in out and "PROBE_STEP_CRASHED" in out and "Probe step 'cpu'" in out


def test_probe_bad_step_is_a_user_error(capsys):
    assert cli(["probe", "--steps", "gpu"]) == 2
    assert "unknown probe step" in capsys.readouterr().err
