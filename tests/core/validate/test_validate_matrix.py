"""The compatibility matrix, the launch command and `bringup validate`."""

from __future__ import annotations

import json
import shlex

from rules_helpers import MODELS, NANO, run

from bringup.cli import main as cli
from bringup.core.rules import LaunchSettings
from bringup.core.validate import compatibility_matrix, validate
from rules_helpers import layer_map


def test_matrix_cells_are_full_validations():
    m = compatibility_matrix(layer_map(NANO), "sglang==0.5.17")
    assert m.devices == ["cuda", "rocm", "xpu", "npu", "cpu", "mps"]
    assert m.backends["xpu"] == ["default", "triton", "intel_xpu"]
    assert len(m.cells) == sum(len(b) for b in m.backends.values()) * len(m.strategies)
    assert m.cell("xpu", "disabled", "intel_xpu").verdict == "ok"
    crash = m.cell("xpu", "disabled", "default")
    assert crash.verdict == "failure" and crash.resolved_backend == "triton"
    assert crash.summary == "ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])"
    assert m.cell("xpu", "auto", "default").codes == ["EXTRA_BUFFER_PLATFORM", "TRITON_LAYER0_PROBE"]
    # Each cell agrees with validating its settings directly.
    direct = validate(layer_map(NANO), "sglang==0.5.17", LaunchSettings(device="rocm", attention_backend="wave"))
    assert m.cell("rocm", "auto", "wave").verdict == direct.verdict == "failure"
    doc = json.loads(json.dumps(m.to_json()))
    assert doc["counts"]["ok"] + doc["counts"]["warning"] + doc["counts"]["failure"] == len(doc["cells"])
    assert doc["strategy_flags"]["no_buffer"] == ["--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"]


def test_matrix_changes_with_the_release():
    old = compatibility_matrix(layer_map(NANO), "sglang==0.5.17")
    new = compatibility_matrix(layer_map(NANO), "sglang==0.5.23")
    assert old.cell("xpu", "auto", "default").verdict == "failure"
    assert new.cell("xpu", "auto", "default").verdict == "ok"
    assert new.cell("xpu", "extra_buffer", "default").codes == ["EXTRA_BUFFER_UNSUPPORTED"]
    assert new.cell("xpu", "auto", "intel_xpu").verdict == "warning"  # the page-size ordering trap


def test_embedded_matrix_is_one_row_per_device():
    m = compatibility_matrix(layer_map(NANO), "embedded")
    assert [(c.device, c.verdict) for c in m.cells] == [("cpu", "ok"), ("cuda", "ok"), ("xpu", "ok")]


def test_launch_command_spells_out_the_choices():
    r = run(NANO, "sglang==0.5.23", device="xpu", attention_backend="intel_xpu", disable_radix_cache=True, tp=4,
            pp=2, mamba_ssm_dtype="bfloat16")
    assert shlex.split(r.command) == [
        "python", "-m", "sglang.launch_server", "--model-path", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B",
        "--device", "xpu", "--attention-backend", "intel_xpu", "--tp-size", "4", "--pp-size", "2",
        "--disable-radix-cache", "--mamba-ssm-dtype", "bfloat16"]
    rocm = run(NANO, "sglang==0.5.23", device="rocm", mamba_strategy="no_buffer", disable_overlap_schedule=True)
    assert "--device cuda --mamba-radix-cache-strategy no_buffer --disable-overlap-schedule" in rocm.command


def test_cli_json(capsys):
    rc = cli(["validate", str(MODELS / NANO), "--target", "sglang==0.5.17", "--device", "xpu", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["ok"] is False and doc["first_error"] == "EXTRA_BUFFER_PLATFORM"
    assert doc["resolved"]["attention_backend"] == "triton" and doc["resolved"]["mamba_strategy"] == "extra_buffer"
    crash = next(f for f in doc["findings"] if f["code"] == "TRITON_LAYER0_PROBE")
    assert set(crash) >= {"code", "severity", "message", "fix", "engine_message", "layers", "source"}
    assert crash["valid_layers"] == [5, 12, 19, 26, 33, 42]
    assert doc["command"].startswith("python -m sglang.launch_server --model-path ")


def test_cli_text_and_matrix(capsys):
    rc = cli(["validate", str(MODELS / NANO), "--target", "sglang==0.5.23", "--device", "xpu", "--attention-backend",
              "intel_xpu", "--disable-radix-cache", "--matrix"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "Verdict: OK" in out and "Compatibility matrix" in out
    assert "python -m sglang.launch_server" in out and "--disable-radix-cache" in out


def test_cli_bad_input_is_a_user_error(capsys):
    assert cli(["validate", str(MODELS / NANO), "--target", "sglang==banana", "--device", "xpu"]) == 2
    assert "sglang==X.Y.Z" in capsys.readouterr().err
    assert cli(["validate", str(MODELS / NANO), "--target", "embedded", "--device", "cpu", "--tp", "0"]) == 2
    assert "--tp 0 must be a positive integer" in capsys.readouterr().err
    assert cli(["validate", str(MODELS / NANO), "--target", "embedded", "--device", "cpu",
                "--attention-backend", "flashy"]) == 2
    assert "--attention-backend 'flashy' is not one of" in capsys.readouterr().err


def test_launch_accepts_target_strings():
    from bringup.core.launch import launch_for, model_path

    path = model_path(layer_map(NANO))
    assert launch_for("sglang==0.5.17", path, LaunchSettings(device="xpu")).argv()[:3] == ["python", "-m", "sglang.launch_server"]
    assert launch_for("embedded", path, LaunchSettings(device="cpu", dtype="bfloat16")).argv()[:2] == ["bringup", "serve"]
    assert launch_for("embedded", "/models/nano", LaunchSettings(device="cpu")).argv()[2] == "/models/nano"
