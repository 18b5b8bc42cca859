"""The checkpoint loader: sharded and single-file safetensors, dtypes, tokenizer, and the messages
people get for checkpoints the engine cannot use."""

from __future__ import annotations

import json

import pytest
import torch
from models_helpers import Req, randomize, run_engine
from safetensors.torch import load_file, save_file

from bringup.core.engine import loader
from bringup.core.errors import UserError

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    cfg = transformers.Qwen3Config(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=1, intermediate_size=48, head_dim=16)
    hf = transformers.Qwen3ForCausalLM(cfg).eval()
    randomize(hf, seed=4)
    folder = tmp_path_factory.mktemp("qwen3")
    hf.save_pretrained(str(folder))
    return hf, folder


def _copy(folder, dest):
    for f in folder.iterdir():
        (dest / f.name).write_bytes(f.read_bytes())
    return dest


def _logits(folder, **kw):
    model = loader.load_model(folder, **kw).model
    return run_engine(model, [Req([3, 7, 11, 5], [4], steps=2)])[0].logits


def test_sharded_checkpoint_loads_the_same_weights(qwen3, tmp_path):
    hf, folder = qwen3
    hf.save_pretrained(str(tmp_path), max_shard_size="20KB")
    assert (tmp_path / loader.INDEX_FILE).is_file() and len(list(tmp_path.glob("*.safetensors"))) > 2
    for a, b in zip(_logits(tmp_path), _logits(folder)):
        assert torch.equal(a, b)


def test_config_json_path_and_dtype_auto(qwen3):
    hf, folder = qwen3
    loaded = loader.load_model(folder / "config.json")
    assert loaded.dtype == torch.float32 and loaded.folder == folder
    assert loader.load_model(folder, dtype="bf16").model.dtype == torch.bfloat16


def test_missing_and_misshapen_weights_are_named(qwen3, tmp_path):
    hf, folder = qwen3
    _copy(folder, tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    del weights["model.layers.1.mlp.up_proj.weight"]
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(UserError, match=r"lacks 1 weight\(s\) the model needs: model.layers.1.mlp.up_proj.weight"):
        loader.load_model(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["intermediate_size"] = 40
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match=r"mlp\.\w+_proj\.weight. has shape \[\d+, \d+\] but the model built from config.json expects"):
        loader.load_model(tmp_path)


def test_unsupported_model_type_names_the_supported_ones(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    from bringup.core.engine.facts import supported_model_types

    with pytest.raises(UserError, match=r"model_type 'gpt2' \(GPT2LMHeadModel\) is not supported .* it runs ") as err:
        loader.load_model(tmp_path)
    assert ", ".join(supported_model_types()) in str(err.value)  # every engine family, in order


def test_bad_sources_get_clear_messages(tmp_path, monkeypatch):
    with pytest.raises(UserError, match="no such folder"):
        loader.resolve_checkpoint(tmp_path / "nope")
    with pytest.raises(UserError, match="has no config.json"):
        loader.resolve_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UserError, match="no \\*.safetensors weights"):
        loader.safetensors_files(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(UserError, match="some-org/not-a-model"):
        loader.resolve_checkpoint("some-org/not-a-model")


def test_infinity_as_transformers_writes_it_is_read_back(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"time_step_limit": [0.0, {"__float__": "Infinity"}]}))
    assert loader.read_model_config(tmp_path)["time_step_limit"] == [0.0, float("inf")]


def test_tokenizer_through_transformers(qwen3, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    hf, folder = qwen3
    _copy(folder, tmp_path)
    with pytest.raises(UserError, match="no tokenizer files"):
        loader.load_tokenizer(tmp_path)
    vocab = {w: i for i, w in enumerate(["<unk>", "hello", "world"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(str(tmp_path))
    assert loader.load_tokenizer(tmp_path)("hello world")["input_ids"] == [1, 2]


def test_bad_device_and_dtype_are_user_errors():
    with pytest.raises(UserError, match="not a torch device"):
        loader.resolve_device("gpu0")
    with pytest.raises(UserError, match="unknown dtype"):
        loader.resolve_dtype("float13", {})
    with pytest.raises(UserError, match="not a floating-point type"):
        loader.resolve_dtype("int8", {})


def test_download_progress_reaches_the_callback_throttled():
    said = []
    bar = loader._tqdm_reporting_to(said.append, every_s=3600)(total=3_000_000, unit="B", desc="Downloading bytes",
                                                               disable=False, file=open("/dev/null", "w"))
    bar.update(1_000_000)  # first report
    bar.update(1_000_000)  # throttled
    bar.update(1_000_000)  # the end is always reported
    bar.close()
    assert said == ["Downloading bytes: 1.0 of 3.0 MB", "Downloading bytes: 3.0 of 3.0 MB"]
