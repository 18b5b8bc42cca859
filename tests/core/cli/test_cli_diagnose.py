"""`bringup diagnose`: text, JSON, --model, standard input, exit codes."""

from __future__ import annotations

import io
import json

from bringup.cli import main
from diagnose_helpers import LOGS, read
from plan_helpers import NANO


def run(capsys, *argv):
    code = main(["diagnose", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_errors_exit_1_with_text(capsys):
    code, out, _ = run(capsys, LOGS / "sglang-0.5.17-xpu-triton-layer0.log", "--model", NANO)
    assert code == 1
    assert "1 error, 1 info in" in out and "ERROR LAYER_NOT_IN_FULL_ATTENTION  (lines 22, 31)" in out
    assert "INFO POOLS_MATCH_PLAN" in out
    assert "requested 0 (mamba2), valid [5, 12, 19, 26, 33, 42] (attention)" in out
    assert "launch: " in out and "device=xpu" in out


def test_warnings_only_exit_0(capsys):
    code, out, _ = run(capsys, LOGS / "sglang-0.5.23-xpu-healthy.log")
    assert code == 0 and "1 warning in" in out and "WARNING PAGE_SIZE_CHANGED" in out


def test_json_document(capsys):
    code, out, _ = run(capsys, LOGS / "sglang-rocm-wave-granite.log", "--json")
    data = json.loads(out)
    assert code == 1 and data["findings"][0]["valid_layers"] == [10, 13, 17, 27]
    assert data["model"] is None


def test_standard_input(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(read("torch-xpu-oom.log")))
    code, out, _ = run(capsys, "-", "--json")
    assert code == 1 and json.loads(out)["findings"][0]["code"] == "DEVICE_OUT_OF_MEMORY"


def test_nothing_found(capsys, tmp_path):
    log = tmp_path / "fine.log"
    log.write_text("[2026-11-02 15:21:09] The server is fired up and ready to roll!\n")
    code, out, _ = run(capsys, log)
    assert code == 0 and "nothing recognised" in out


def test_bad_input_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, tmp_path / "missing.log")
    assert code == 2 and "no log file" in err
    code, _, err = run(capsys, tmp_path)
    assert code == 2 and "is a folder" in err
    code, _, err = run(capsys, LOGS / "torch-no-xpu.log", "--model", tmp_path / "nowhere" / "config.json")
    assert code == 2 and err


def test_the_logs_own_model_path_gives_the_map(tmp_path, capsys):
    import json
    import shutil

    from repo_paths import SHARED_MODELS

    from bringup.cli import main

    model = tmp_path / "qwen3next"
    model.mkdir()
    shutil.copy(SHARED_MODELS / "Qwen__Qwen3-Next-80B-A3B-Instruct.json", model / "config.json")
    log = tmp_path / "pp.log"
    log.write_text(f"vllm serve {model} --pipeline-parallel-size 2\nKeyError: 'language_model.model.layers.30.linear_attn'\n")
    assert main(["diagnose", str(log), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    (layer,) = doc["reading"]["layers"]
    assert layer["layer"] == 30 and layer["mixer"] == "gated_delta_net" and layer["pp_stage"] == 1
