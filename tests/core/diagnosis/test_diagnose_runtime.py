"""Our engine's errors, torch / XPU / CUDA runtime errors, transformers' errors, and the fallback."""

from __future__ import annotations

import pytest

from bringup.core.diagnosis import diagnose
from diagnose_helpers import codes, diagnose_file


@pytest.mark.parametrize("log, code, engine", [
    ("bringup-engine-pools-do-not-fit.log", "ENGINE_POOLS_DO_NOT_FIT", "bringup"),
    ("torch-xpu-oom.log", "DEVICE_OUT_OF_MEMORY", "torch"),
    ("torch-cuda-oom-old.log", "DEVICE_OUT_OF_MEMORY", "torch"),
    ("torch-no-xpu.log", "TORCH_NOT_COMPILED_FOR_DEVICE", "torch"),
    ("torch-cpu-half.log", "DTYPE_NOT_IMPLEMENTED", "torch"),
    ("torch-arc-fp64.log", "FP64_UNSUPPORTED", "torch"),
    ("transformers-remote-code.log", "TRUST_REMOTE_CODE", "transformers"),
    ("transformers-unknown-arch.log", "UNKNOWN_ARCHITECTURE", "transformers"),
])
def test_one_finding_per_log(log, code, engine):
    result = diagnose_file(log)
    assert codes(result) == [code]  # the KeyError under the transformers error is explained by it
    assert result.findings[0].engine == engine and not result.ok


def test_xpu_oom_figures():
    f = diagnose_file("torch-xpu-oom.log").findings[0]
    assert f.title == "XPU ran out of memory"
    assert (f.details["size"], f.details["total"], f.details["free"]) == ("2.00 GiB", "23.86 GiB", "1.13 GiB")
    assert "2.00 GiB failed on the device (total 23.86 GiB, 1.13 GiB free)" in f.explanation


def test_old_cuda_oom_wording_has_no_placeholders():
    f = diagnose_file("torch-cuda-oom-old.log").findings[0]
    assert "?" not in f.explanation and "1.50 GiB" in f.explanation


def test_engine_pool_layer_error():
    f = diagnose_file("bringup-engine-pool-layer.log").findings[0]
    assert f.code == "LAYER_NOT_IN_POOL" and f.requested_layer == 0
    assert f.valid_layers == (5, 12, 19, 26, 33, 42) and f.details["pool"] == "KV pool"


def test_engine_state_pool_and_exhaustion_messages():
    log = ("bringup.core.engine.pools.PoolLayerError: layer 5 is not in the state pool; it holds layers [0, 2, 4]\n"
           "bringup.core.engine.pools.PoolExhaustedError: asked for 3 pages but only 1 of 64 are free\n")
    result = diagnose(log)
    assert codes(result) == ["LAYER_NOT_IN_POOL", "ENGINE_POOL_EXHAUSTED"]
    assert result.findings[0].title == "Layer 5 is not in the state pool"
    assert result.findings[1].details == {"want": "3", "what": "page", "free": "1", "total": "64"}


def test_unknown_exception_is_reported_not_dropped():
    result = diagnose_file("unknown-traceback.log")
    assert codes(result) == ["UNRECOGNIZED_ERROR"]
    f = result.findings[0]
    assert f.title == "ZeroDivisionError: division by zero" and f.lines == (5,)


def test_empty_and_clean_logs():
    assert diagnose("").findings == [] and diagnose("").ok
    clean = diagnose("[2026-11-02 15:21:09] The server is fired up and ready to roll!\n")
    assert clean.findings == [] and clean.lines_read == 1


def test_ansi_colours_are_ignored():
    log = "\x1b[31mRuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\x1b[0m\n"
    assert codes(diagnose(log)) == ["DEVICE_OUT_OF_MEMORY"]


def test_json_shape():
    data = diagnose_file("sglang-0.5.17-xpu-triton-layer0.log").to_json()
    f = data["findings"][0]
    for key in ("code", "severity", "title", "explanation", "fix", "lines", "matched", "layers", "source"):
        assert key in f
    assert f["requested_layer"] == 0 and f["valid_layers"] == [5, 12, 19, 26, 33, 42]
    assert data["ok"] is False and data["lines_read"] > 30


def test_diagnose_log_returns_the_findings():
    from bringup.core.diagnosis import diagnose_log
    from diagnose_helpers import read

    findings = diagnose_log(read("bringup-engine-pool-layer.log"))
    assert [f.code for f in findings] == ["LAYER_NOT_IN_POOL"] and findings[0].requested_layer == 0
