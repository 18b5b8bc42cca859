"""Validate includes the plan (issue 12): with the device's memory, a launch whose weights do not fit,
or whose pools hold no running request, fails with the plan's numbers and a fix that fits."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bringup.core.layermap.sizes import parse_size
from bringup.core.rules import LaunchSettings
from bringup.core.validate import validate
from bringup.core.sources.resolve import load_layer_map

QWEN_NEXT = "Qwen__Qwen3-Next-80B-A3B-Instruct.json"
NANO = "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"


@pytest.fixture(scope="module")
def qwen_next(shared_models):
    return load_layer_map(str(shared_models / QWEN_NEXT))


def _plan_codes(result):
    return [f.code for f in result.findings if f.code.startswith("PLAN_")]


def test_the_done_when_command_fails_and_says_why(shared_models):
    cmd = [sys.executable, "-m", "bringup", "validate", str(shared_models / QWEN_NEXT), "--target", "sglang==0.5.23",
           "--device", "xpu", "--device-memory", "64GiB"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    assert "FAILS" in out.stdout and "PLAN_WEIGHTS_DO_NOT_FIT" in out.stdout
    assert "148.41 GiB" in out.stdout and "64.00 GiB" in out.stdout  # the plan's numbers
    assert "fix:    --tp 4 fits" in out.stdout


def test_weights_that_do_not_fit_are_an_error_with_a_fix_that_fits(qwen_next):
    result = validate(qwen_next, "sglang==0.5.23", LaunchSettings(device="xpu"), device_memory=parse_size("64GiB"))
    assert not result.ok and _plan_codes(result) == ["PLAN_WEIGHTS_DO_NOT_FIT"]
    assert result.plan is not None and result.plan.bottleneck == "weights"
    finding = result.first_error
    assert finding.code == "PLAN_WEIGHTS_DO_NOT_FIT"
    tp = int(finding.fix.split()[1])
    # the fix is true: the same launch with that TP validates with a plan that serves requests
    fixed = validate(qwen_next, "sglang==0.5.23", LaunchSettings(device="xpu", tp=tp), device_memory=parse_size("64GiB"))
    assert _plan_codes(fixed) == ["PLAN_FITS"] and fixed.plan.max_running_requests > 0


def test_zero_planned_requests_is_an_error_that_marks_the_state_layers(nano_layer_map):
    # Between a device too small for the weights and one that serves requests lies a band where the
    # weights fit but the state pool holds less than one request: Validate calls it an error too.
    verdicts = []
    for quarter_gib in range(60 * 4, 90 * 4):
        result = validate(nano_layer_map, "sglang==0.5.23", LaunchSettings(device="cuda"),
                          device_memory=quarter_gib * 2**28)
        (finding,) = [f for f in result.findings if f.code.startswith("PLAN_")]
        verdicts.append(finding.code)
        if finding.code == "PLAN_NO_REQUESTS":
            assert finding.is_error and not result.ok
            assert result.plan.max_running_requests == 0 and result.plan.bottleneck == "state"
            assert list(finding.layers) == nano_layer_map.state_layers
            assert "0 running requests" in finding.message
            break
    assert verdicts[0] == "PLAN_WEIGHTS_DO_NOT_FIT" and verdicts[-1] == "PLAN_NO_REQUESTS"


def test_without_device_memory_there_is_no_plan(nano_layer_map):
    result = validate(nano_layer_map, "sglang==0.5.23", LaunchSettings(device="cuda"))
    assert result.plan is None and not _plan_codes(result)


def test_json_carries_the_plan(shared_models):
    cmd = [sys.executable, "-m", "bringup", "validate", str(shared_models / NANO), "--target", "sglang==0.5.23",
           "--device", "cuda", "--device-memory", "141GB", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and doc["ok"]
    assert doc["plan"]["max_running_requests"] > 0
    assert [f["code"] for f in doc["findings"] if f["code"].startswith("PLAN_")] == ["PLAN_FITS"]
