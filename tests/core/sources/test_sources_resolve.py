"""Loading configs: file, folder, catalogue, hub (through a local cache), and every failure's message."""

from __future__ import annotations

import json

import httpx
import pytest
from huggingface_hub import constants as hf_constants
from huggingface_hub import errors as hf_errors

from bringup.core.sources import hub
from bringup.core.errors import UserError
from bringup.core.sources.resolve import LoadCancelled, load_config, load_layer_map

from layermap_helpers import SHARED_MODELS

NANO = SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"
H56 = SHARED_MODELS / "nvidia__Nemotron-H-56B-Base-8K.json"


def test_file_with_bare_infinity_loads_and_names_the_model():
    assert "Infinity" in H56.read_text()
    loaded = load_config(H56)
    assert loaded.kind == "file" and loaded.name == "nvidia/Nemotron-H-56B-Base-8K"
    assert loaded.config["time_step_limit"][1] == float("inf")


def test_negative_infinity_and_nan_are_accepted(tmp_path):
    cfg = json.loads(NANO.read_text())
    text = json.dumps(cfg)[:-1] + ', "time_step_limit": [-Infinity, Infinity], "odd": NaN}'
    path = tmp_path / "config.json"
    path.write_text(text)
    loaded = load_config(path)
    assert loaded.config["time_step_limit"][0] == float("-inf")
    assert load_layer_map(path).full_attention_layers == [5, 12, 19, 26, 33, 42]


def test_folder_with_config_json(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(NANO.read_text())
    loaded = load_config(folder)
    assert (loaded.kind, loaded.name, loaded.path) == ("folder", "my-model", folder)


def test_folder_without_config_json_is_a_clean_error(tmp_path):
    with pytest.raises(UserError, match="has no config.json"):
        load_config(tmp_path)


def test_hub_cache_snapshot_folder_is_named_after_the_repo(tmp_path):
    root = _cache_with(tmp_path, "acme/nano-copy", NANO.read_text())
    snapshot = next((root / "models--acme--nano-copy" / "snapshots").iterdir())
    assert load_config(snapshot).name == "acme/nano-copy"


def test_catalogue_name():
    loaded = load_config("NVIDIA-Nemotron-3-Nano-30B-A3B")
    assert loaded.kind == "catalogue" and loaded.path is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "not valid JSON"),
        ("[1, 2]", "not an object"),
        ("", "not valid JSON"),
    ],
)
def test_broken_files_are_clean_errors(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        load_config(path)


def test_not_utf8_is_a_clean_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UserError, match="UTF-8"):
        load_config(path)


@pytest.mark.parametrize("source", ["./missing/config.json", "/no/such/dir/", "model.json", "not a model at all"])
def test_unknown_sources_are_clean_errors(source):
    with pytest.raises(UserError):
        load_config(source)


def test_empty_source_says_what_to_pass():
    with pytest.raises(UserError, match="catalogue name"):
        load_config("  ")


def test_unknown_model_type_names_it_and_the_families(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "brand_new_arch", "hidden_size": 8}))
    with pytest.raises(UserError, match="brand_new_arch") as err:
        load_layer_map(path)
    assert "NemotronH" in str(err.value) and "Jamba" in str(err.value)


def test_new_model_type_with_known_layer_types_still_maps(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({
        "model_type": "future_hybrid", "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
        "intermediate_size": 128, "layer_types": ["linear_attention", "linear_attention", "full_attention"] * 2,
    }))
    m = load_layer_map(path)
    assert m.full_attention_layers == [2, 5] and m.family == "gdn"
    assert any("layer_types" in n for n in m.notes)


def test_nested_text_config_is_unwrapped(tmp_path):
    inner = json.loads((SHARED_MODELS / "google__gemma-3-1b-it.json").read_text())
    wrapper = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": inner,
               "vision_config": {"hidden_size": 1152}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(wrapper))
    m = load_layer_map(path)
    assert m.full_attention_layers == [5, 11, 17, 23] and m.model_type == "gemma3_text"
    assert m.architecture == "Gemma3ForCausalLM"
    assert any("text_config" in n for n in m.notes)


def test_gemma4_wrapper_with_explicit_layer_types(tmp_path):
    kinds = ["sliding_attention"] * 5 + ["full_attention"]
    text = {"model_type": "gemma4_text", "hidden_size": 256, "num_hidden_layers": 12, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 64, "global_head_dim": 128, "intermediate_size": 512,
            "vocab_size": 1000, "sliding_window": 512, "layer_types": kinds * 2}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma4", "text_config": text, "vision_config": {}}))
    m = load_layer_map(path)
    assert m.full_attention_layers == [5, 11] and len(m.sliding_attention_layers) == 10
    assert m.layers[5].attention.head_dim == 128 and m.layers[0].attention.head_dim == 64
    assert m.layers[0].attention.window == 512


def test_progress_and_cancel():
    seen = []
    load_layer_map("NVIDIA-Nemotron-3-Nano-30B-A3B", progress=seen.append)
    assert seen and seen[-1] == "building the layer map"
    with pytest.raises(LoadCancelled):
        load_layer_map("NVIDIA-Nemotron-3-Nano-30B-A3B", cancel=lambda: True)


# -- the hub, through a local cache ---------------------------------------------------------------


def _cache_with(tmp_path, repo: str, config_text: str):
    """A Hugging Face hub cache holding one repo's config.json at refs/main."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    root = tmp_path / "hub"
    repo_dir = root / f"models--{repo.replace('/', '--')}"
    snapshot = repo_dir / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(config_text)
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(commit)
    return root


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    root = _cache_with(tmp_path, "acme/nano-copy", NANO.read_text())
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(root))
    return root


def test_hub_id_offline_reads_the_cache(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    loaded = load_config("acme/nano-copy")
    assert loaded.kind == "hub" and loaded.name == "acme/nano-copy"
    assert load_layer_map("acme/nano-copy").full_attention_layers == [5, 12, 19, 26, 33, 42]


def test_hub_id_offline_and_not_cached_says_so(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UserError, match="HF_HUB_OFFLINE") as err:
        load_config("acme/other-model")
    assert "acme/other-model" in str(err.value)


def test_unreachable_hub_uses_the_cache_at_once(hub_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: False)
    assert load_config("acme/nano-copy").kind == "hub"
    with pytest.raises(UserError, match="could not reach the Hugging Face hub"):
        load_config("acme/not-cached")


def test_unreachable_hub_falls_back_to_the_catalogue_for_known_ids(hub_cache, monkeypatch):
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: False)
    m = load_layer_map("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B")
    assert m.full_attention_layers == [5, 12, 19, 26, 33, 42]
    assert any("catalogue" in n for n in m.notes)


def _response(status: int) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("GET", "https://huggingface.co/acme/x/resolve/main/config.json"))


@pytest.mark.parametrize(
    "error, message",
    [
        (hf_errors.GatedRepoError("gated", response=_response(403)), "is gated"),
        (hf_errors.RepositoryNotFoundError("nope", response=_response(404)), "was not found"),
        (hf_errors.RevisionNotFoundError("nope", response=_response(404)), "revision does not exist"),
        (hf_errors.RemoteEntryNotFoundError("nope", response=_response(404)), "has no config.json"),
        (hf_errors.HfHubHTTPError("boom", response=_response(500)), "answered with an error"),
        (hf_errors.HfHubHTTPError("denied", response=_response(401)), "hf auth login"),
        (httpx.ConnectError("connection refused"), "network error"),
        (hf_errors.OfflineModeIsEnabled("offline"), "HF_HUB_OFFLINE"),
    ],
)
def test_each_hub_failure_gets_its_own_message(monkeypatch, error, message):
    import huggingface_hub

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fail)
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: True)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(UserError, match=message) as err:
        load_config("acme/some-model")
    assert "acme/some-model" in str(err.value)


def test_revision_suffix_is_passed_to_the_hub(monkeypatch, tmp_path):
    import huggingface_hub

    seen = {}
    path = tmp_path / "config.json"
    path.write_text(NANO.read_text())

    def fake(repo, filename, **kwargs):
        seen.update(repo=repo, filename=filename, **kwargs)
        return str(path)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: True)
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    loaded = load_config("acme/model@v1.0")
    assert (seen["repo"], seen["filename"], seen["revision"]) == ("acme/model", "config.json", "v1.0")
    assert loaded.name == "acme/model" and loaded.kind == "hub"
