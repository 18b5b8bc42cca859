"""`default` names the bundled checkpoint everywhere: `inspect default` reads the config the engine serves."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from layermap_helpers import REPO, SHARED_MODELS

from bringup.core.sources import default_model as dm

PROBE = ("import json, sys; from bringup.core.sources.resolve import load_config; l = load_config(sys.argv[1]); "
         "print(json.dumps({'name': l.name, 'path': str(l.path), 'torch': 'torch' in sys.modules}))")


def _python(code: str, *args: str, cache) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=300)


def _fake_cached_checkpoint(cache):
    folder = dm.checkpoint_dir(root=cache / "bringup" / "models")
    folder.mkdir(parents=True)
    (folder / "config.json").write_text((SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json").read_text())
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "tokenizer.json").write_text("{}")
    return folder


def test_inspect_default_reads_the_cached_checkpoint_without_torch(tmp_path):
    folder = _fake_cached_checkpoint(tmp_path)
    for alias in ("default", "Default", dm.DEFAULT_CHECKPOINT_NAME):
        out = _python(PROBE, alias, cache=tmp_path)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == {"name": dm.DEFAULT_CHECKPOINT_NAME, "path": str(folder), "torch": False}
    out = subprocess.run([sys.executable, "-m", "bringup", "inspect", "default", "--json"], capture_output=True,
                         text=True, cwd=REPO, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)}, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["full_attention_layers"] == [5, 12, 19, 26, 33, 42] and doc["num_layers"] == 52


def test_default_is_built_once_in_a_child_when_missing(tmp_path):
    out = _python(PROBE, "default", cache=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "building the default model" in out.stderr  # a command line says why it pauses
    found = json.loads(out.stdout)
    folder = dm.checkpoint_dir(root=tmp_path / "bringup" / "models")
    assert found == {"name": dm.DEFAULT_CHECKPOINT_NAME, "path": str(folder), "torch": False}
    assert dm.is_complete(folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["hybrid_override_pattern"] == dm.NEMOTRON_3_NANO_PATTERN
