"""`--load-format dummy`: any source the map reads runs at its real size with seeded random weights,
refused before allocating when it cannot fit; tested at tiny sizes on the CPU."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from bringup.core.engine import device as devices
from bringup.core.engine.dummy_weights import VocabCoveringTokenizer, load_dummy_model
from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams
from bringup.core.errors import UserError

from engine_helpers import tiny_nemotron_h


@pytest.fixture(scope="module")
def config_only(tmp_path_factory):
    """A folder with a config.json and nothing else (no weights, no tokenizer)."""
    root = tmp_path_factory.mktemp("dummy")
    ckpt = tiny_nemotron_h(root / "ckpt")
    folder = root / "config-only"
    folder.mkdir()
    config = json.loads((ckpt / "config.json").read_text())
    config["vocab_size"] = 4000  # wider than the bundled tokenizer: ids past it must still decode
    (folder / "config.json").write_text(json.dumps(config))
    return folder, ckpt


def test_a_config_only_folder_serves_with_dummy_weights(config_only):
    folder, _ = config_only
    engine = Engine(EngineConfig(str(folder), device="cpu", load_format="dummy", max_running_requests=4,
                                 mem_fraction=0.5), log=lambda m: None)
    info = engine.server_info()
    assert info["load_format"] == "dummy" and info["weights_source"].startswith("dummy")
    assert info["vocab_size"] == 4000 and len(engine.tokenizer) == 4000
    assert isinstance(engine.tokenizer, VocabCoveringTokenizer)
    outs = engine.generate([[5, 6, 7, 8], [9, 10]], SamplingParams(max_new_tokens=6, temperature=0, ignore_eos=True))
    assert [len(o) for o in outs] == [6, 6]
    assert all(0 <= t < 4000 for o in outs for t in o)
    assert isinstance(engine.tokenizer.decode([3999, 17]), str)  # past the bundled vocabulary, still text
    for p in engine.model.parameters():
        assert torch.isfinite(p).all()


def test_dummy_weights_are_seeded_and_follow_the_usual_initialisation(config_only):
    folder, _ = config_only
    a = load_dummy_model(str(folder), device="cpu").model
    b = load_dummy_model(str(folder), device="cpu").model
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), f"{name} differs between two loads with the same seed"
    block = a.backbone.layers[0]
    assert torch.equal(block.norm.weight, torch.ones_like(block.norm.weight))
    A = -torch.exp(block.mixer.A_log.float())
    assert (A <= -1 + 1e-5).all() and (A >= -16 - 1e-4).all()
    assert 0.01 < a.backbone.embeddings.weight.std().item() < 0.1


def test_a_folder_with_weights_keeps_its_tokenizer_under_dummy(config_only):
    _, ckpt = config_only
    engine = Engine(EngineConfig(str(ckpt), device="cpu", load_format="dummy", max_running_requests=2,
                                 mem_fraction=0.5), log=lambda m: None)
    assert engine.tokenizer_source == str(ckpt)
    assert engine.server_info()["load_format"] == "dummy"


def test_the_real_nano_is_refused_before_allocating_when_it_cannot_fit(monkeypatch):
    monkeypatch.setattr(devices, "free_memory", lambda device: 8 * 1024**3)
    with pytest.raises(UserError) as err:
        load_dummy_model("NVIDIA-Nemotron-3-Nano-30B-A3B", device="cpu", dtype="bfloat16")
    text = str(err.value)
    assert "need 5" in text and "GiB" in text and "8.00 GiB free" in text  # ~58 GiB of bf16 weights


def test_unknown_load_format_is_a_user_error(config_only):
    folder, _ = config_only
    with pytest.raises(UserError, match="load-format"):
        Engine(EngineConfig(str(folder), device="cpu", load_format="gguf-ish"), log=lambda m: None)


def test_serve_and_bench_take_the_flag():
    import argparse

    from bringup.core.cli import bench, serve

    for module in (serve, bench):
        parser = argparse.ArgumentParser()
        module.configure(parser)
        args = parser.parse_args(["NVIDIA-Nemotron-3-Nano-30B-A3B", "--load-format", "dummy"])
        assert args.load_format == "dummy" and args.source == "NVIDIA-Nemotron-3-Nano-30B-A3B"


def test_catalogue_names_resolve_for_serve():
    from bringup.core.engine.model_source import model_source

    assert model_source("NVIDIA-Nemotron-3-Nano-30B-A3B", "dummy") == ("NVIDIA-Nemotron-3-Nano-30B-A3B",
                                                                        "NVIDIA-Nemotron-3-Nano-30B-A3B")
    assert model_source("NVIDIA-Nemotron-3-Nano-30B-A3B", "auto")[0] == "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B"


def test_the_running_label_names_architecture_params_weights_dtype_and_device(config_only):
    from bringup.core.client.running_label import is_random_weights, running_label

    folder, _ = config_only
    engine = Engine(EngineConfig(str(folder), device="cpu", load_format="dummy", max_running_requests=2,
                                 mem_fraction=0.5), log=lambda m: None)
    info = engine.server_info()
    label = running_label(info)
    assert label.startswith("NemotronHForCausalLM · ") and "M params" in label
    assert "dummy weights (seeded random: text is noise)" in label and "float32" in label and "cpu" in label
    assert is_random_weights(info)
    assert not is_random_weights({**info, "load_format": "auto", "model": "my-checkpoint"})
    assert "bundled miniature" in running_label({**info, "load_format": "auto", "model": "nemotron-3-nano-pattern-tiny"})
