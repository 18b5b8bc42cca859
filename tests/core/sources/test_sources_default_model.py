"""The default checkpoint generator: exact Nemotron-3-Nano pattern, a working tokenizer, built once."""

from __future__ import annotations

import json
import shutil

import pytest

from bringup.core.sources import default_model as dm

NANO_ATTENTION = [5, 12, 19, 26, 33, 42]


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def tiny_checkpoint(tiny_root):
    return dm.ensure_default_checkpoint(dm.TINY_TEST_SPEC, tiny_root)


def test_pattern_is_nemotron_3_nano_exactly(tiny_checkpoint):
    config = json.loads((tiny_checkpoint / "config.json").read_text())
    assert config["hybrid_override_pattern"] == dm.NEMOTRON_3_NANO_PATTERN
    assert config["num_hidden_layers"] == 52
    types = config["layers_block_type"]
    assert len(types) == 52
    assert [i for i, t in enumerate(types) if t == "full_attention"] == NANO_ATTENTION
    assert types.count("linear_attention") == 23 and types.count("moe") == 23
    assert config["model_type"] == "nemotron_h"


def test_transformers_loads_it_with_the_same_pattern(tiny_checkpoint):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_checkpoint)
    assert config.hybrid_override_pattern == dm.NEMOTRON_3_NANO_PATTERN
    assert config.hidden_size == dm.TINY_TEST_SPEC.hidden_size


def test_tokenizer_round_trips_text_and_has_special_tokens(tiny_checkpoint):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_checkpoint)
    text = "The KV pool holds 4096 tokens; café, naïve, 東京 and emoji 🙂 fall back to bytes."
    ids = tok(text).input_ids
    assert tok.decode(ids) == text
    assert len(ids) < len(text.encode())  # merges learned from the corpus shorten common words
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
    chat = tok.apply_chat_template([{"role": "user", "content": "hello"}], tokenize=False, add_generation_prompt=True)
    assert chat.startswith("<|bos|><|user|>\nhello<|eos|>") and chat.endswith("<|assistant|>\n")
    config = json.loads((tiny_checkpoint / "config.json").read_text())
    assert config["vocab_size"] == len(tok)


def test_second_call_reuses_the_folder(tiny_root, tiny_checkpoint):
    marker = tiny_checkpoint / "model.safetensors"
    before = marker.stat().st_mtime_ns
    again = dm.ensure_default_checkpoint(dm.TINY_TEST_SPEC, tiny_root)
    assert again == tiny_checkpoint
    assert marker.stat().st_mtime_ns == before
    # No temporary folders are left next to it.
    assert [p.name for p in tiny_root.iterdir()] == [tiny_checkpoint.name]


def test_build_is_deterministic(tmp_path, tiny_checkpoint):
    other = dm.ensure_default_checkpoint(dm.TINY_TEST_SPEC, tmp_path)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (other / name).read_bytes() == (tiny_checkpoint / name).read_bytes(), name


def test_cache_location_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = dm.checkpoint_dir()
    assert folder.parent == tmp_path / "bringup" / "models"
    assert folder.name == f"nemotron-3-nano-pattern-tiny-v{dm.RECIPE_VERSION}"
    assert dm.checkpoint_dir(dm.TINY_TEST_SPEC).name != folder.name


def test_failed_build_leaves_nothing_behind(monkeypatch, tmp_path):
    def broken(folder, spec):
        (folder / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    monkeypatch.setattr(dm, "build_checkpoint", broken)
    with pytest.raises(RuntimeError):
        dm.ensure_default_checkpoint(dm.TINY_TEST_SPEC, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_default_and_no_source_resolve_to_the_cached_checkpoint(monkeypatch, tmp_path, tiny_checkpoint):
    # Put a complete checkpoint where the default one lives, so resolution reuses it (no build).
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    target = dm.checkpoint_dir()
    target.parent.mkdir(parents=True)
    shutil.copytree(tiny_checkpoint, target)
    for source in (None, "", "default", "DEFAULT", dm.DEFAULT_CHECKPOINT_NAME):
        assert dm.resolve_default(source) == str(target)
    assert dm.resolve_default("/some/model/folder") is None
    assert dm.resolve_default("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B") is None
