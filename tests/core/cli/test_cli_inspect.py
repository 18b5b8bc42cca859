"""`bringup inspect` as a user runs it: JSON, text, PP, errors, and what it imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from layermap_helpers import REPO, SHARED_MODELS

HEAVY = ("torch", "transformers", "numpy", "PySide6", "pyqtgraph")


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "bringup", "inspect", *args], capture_output=True, text=True, cwd=REPO, env=full_env,
        timeout=60,
    )


def test_json_document_for_the_default_model():
    out = run("NVIDIA-Nemotron-3-Nano-30B-A3B", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["full_attention_layers"] == [5, 12, 19, 26, 33, 42]
    assert doc["model_type"] == "nemotron_h" and doc["architecture"] == "NemotronHForCausalLM"
    assert doc["family"] == "mamba2" and doc["num_layers"] == 52
    assert len(doc["state_layers"]) == 23 and len(doc["moe_layers"]) == 23 and doc["mlp_layers"] == []
    assert doc["sliding_attention_layers"] == []
    assert doc["params"]["total"] > doc["params"]["active"] > 0
    assert doc["layers"][12] == {"index": 12, "mixer": "attention", "ffn": "none", "kv_pool_index": 1,
                                 "state_pool_index": None, "pp_stage": 0}


def test_json_with_pp_and_a_file_path():
    out = run(str(SHARED_MODELS / "nvidia__Nemotron-H-56B-Base-8K.json"), "--pp", "4", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["pp_size"] == 4
    assert [l["pp_stage"] for l in doc["layers"]].count(3) == 30


def test_human_text_shows_the_folded_map():
    out = run(str(SHARED_MODELS / "nvidia__Nemotron-H-56B-Base-8K.json"), "--pp", "2")
    assert out.returncode == 0, out.stderr
    assert "M-M-M-M*-M-  x10" in out.stdout
    assert "[7, 18, 29, 40, 51, 62, 73, 84, 95, 106]" in out.stdout
    assert "stage 1: layers 59-117" in out.stdout
    assert "40,960 bytes/token" in out.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["no/such-model"], "no/such-model"),
        (["./missing.json"], "no such file"),
        (["NVIDIA-Nemotron-3-Nano-30B-A3B", "--pp", "0"], "--pp"),
        (["NVIDIA-Nemotron-3-Nano-30B-A3B", "--pp", "100"], "more pipeline stages"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(args, message):
    out = run(*args)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""


def test_bad_config_file_exits_2(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "nemotron_h", "hybrid_override_pattern": 7}')
    out = run(str(path), "--json")
    assert out.returncode == 2 and "hybrid_override_pattern" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("source", ["NVIDIA-Nemotron-3-Nano-30B-A3B", str(SHARED_MODELS / "LiquidAI__LFM2-2.6B.json"), "acme/cached-or-not"])
def test_inspect_imports_no_torch_transformers_numpy_or_qt(source):
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['bringup', 'inspect', {source!r}, '--json']\n"
        "try:\n    runpy.run_module('bringup', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=60)
    assert "HEAVY []" in out.stderr, out.stderr[-2000:]


def test_hub_id_from_a_local_cache_with_hf_hub_offline(tmp_path):
    commit = "89abcdef0123456789abcdef0123456789abcdef"
    repo_dir = tmp_path / "hub" / "models--acme--nano-copy"
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text((SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json").read_text())
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(commit)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    out = run("acme/nano-copy", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["full_attention_layers"] == [5, 12, 19, 26, 33, 42]
    missing = run("acme/not-in-cache", env=env)
    assert missing.returncode == 2 and "HF_HUB_OFFLINE" in missing.stderr and "acme/not-in-cache" in missing.stderr
