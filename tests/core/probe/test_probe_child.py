"""The device probe: a real run on this machine, and children that crash, hang or raise on purpose."""

from __future__ import annotations

import json
import platform

import pytest

from bringup.core.probe.runner import run_probe


@pytest.fixture(scope="module")
def report():
    return run_probe(timeout=120)


def test_real_probe_of_this_machine(report):
    import torch

    assert report.children == 1 and report.ok
    assert report.python["version"] == platform.python_version()
    assert report.torch["version"] == torch.__version__
    cpu = report.devices["cpu"]
    assert cpu.available and cpu.count == 1 and cpu.devices[0]["total_memory"] > 0
    cuda = report.devices["cuda"]
    assert cuda.available == torch.cuda.is_available()
    assert report.step("cuda.devices").verdict == ("ok" if cuda.available else "absent")
    layers = [s.layer for s in report.steps]
    assert layers == sorted(layers)  # libraries first, then runtime
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["transformers"] == report.packages["transformers"] and "cpu" in doc["devices"]
    assert set(report.available_devices()) >= {"cpu"}


def test_crashing_step_is_a_finding_and_the_rest_still_runs():
    steps = ["python", "cpu", "xpu.available", "xpu.devices", "xpu.memory", "npu"]
    r = run_probe(steps=steps, simulate="crash:xpu.available", timeout=120)
    verdicts = {s.name: s.verdict for s in r.steps}
    assert verdicts == {"python": "ok", "cpu": "ok", "xpu.available": "crashed", "xpu.devices": "skipped",
                        "xpu.memory": "skipped", "npu": "absent"}
    assert r.children == 2 and not r.ok  # npu ran in a fresh child after the crash
    (f,) = [f for f in r.findings if f.code == "PROBE_STEP_CRASHED"]
    assert f.stage == "xpu.available" and "SIGABRT" in f.message and "pytorch#179891" in f.source
    assert r.devices["xpu"].verdict == "crashed" and not r.devices["xpu"].available
    assert r.devices["cpu"].available


def test_hanging_step_times_out():
    r = run_probe(steps=["python", "packages", "cpu"], simulate="hang:packages", timeout=2)
    assert [s.verdict for s in r.steps] == ["ok", "timeout", "ok"]
    assert [f.code for f in r.findings] == ["PROBE_STEP_TIMEOUT"]


def test_raising_step_is_failed_with_traceback():
    r = run_probe(steps=["python", "cpu"], simulate="raise:cpu")
    cpu = r.step("cpu")
    assert cpu.verdict == "failed" and "simulated failure" in cpu.detail and "Traceback" in cpu.data["traceback"]
    assert [f.code for f in r.findings] == ["PROBE_STEP_FAILED"] and r.ok  # a warning, not an error


def test_child_that_dies_at_start_is_reported():
    # A child interpreter that exits before any step: every step it was given is reported, none is lost.
    r = run_probe(steps=["python", "cpu"], python=_exit_immediately())
    assert [s.verdict for s in r.steps] == ["crashed", "crashed"]
    assert "before this step began" in r.steps[0].detail


def _exit_immediately() -> str:
    import os
    import stat
    import tempfile

    path = os.path.join(tempfile.mkdtemp(), "python")
    with open(path, "w") as f:
        f.write("#!/bin/sh\necho 'boom: cannot start' >&2\nexit 3\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def test_bad_simulation_and_step_names():
    with pytest.raises(ValueError, match="bad probe simulation"):
        run_probe(simulate="explode:cpu")
    with pytest.raises(ValueError, match="unknown probe step"):
        run_probe(steps=["gpu"])


def test_triton_backends_map_to_devices(tmp_path, monkeypatch):
    """Triton lists its backends in triton.backends.backends (nvidia, amd, intel...): a stand-in package
    with that layout (no real Triton on this CPU machine) checks the mapping to devices."""
    pkg = tmp_path / "triton"
    (pkg / "backends").mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = '3.6.0'\n")
    (pkg / "backends" / "__init__.py").write_text("backends = {'intel': object(), 'nvidia': object()}\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    r = run_probe(steps=["triton"])
    assert r.triton == {"installed": True, "verdict": "ok", "version": "3.6.0", "backends": ["intel", "nvidia"],
                        "devices": {"cuda": True, "xpu": True, "cpu": False}}


def test_total_timeout_reports_what_was_not_run():
    r = run_probe(steps=["python", "packages", "cpu"], simulate="hang:packages", timeout=2, total_timeout=1)
    assert [s.verdict for s in r.steps] == ["ok", "timeout", "skipped"]
    assert "stopped after 1 s" in r.step("cpu").detail
