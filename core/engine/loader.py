"""Loading a model for the embedded engine: checkpoint folder, GGUF file (or hub id) -> our model + tokenizer.

Weights come from the folder's safetensors files (one file, or shards listed in
model.safetensors.index.json) under the names transformers saves; each model maps those names to
its parameters (`CausalLM.map_weight_name`). The model is built on the meta device first, so no
time or memory goes into random initialisation, then allocated once on the target device and
filled tensor by tensor. A GGUF file (core/sources/gguf_file.py) stands in for the folder: its
metadata gives the config, its tensors (dequantised) the weights under the same names.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch

from bringup.core.sources.config_file import read_config_file
from bringup.core.errors import UserError
from bringup.core.sources.gguf_file import is_gguf_path, iter_gguf_weights, load_gguf_tokenizer, read_gguf_config
from bringup.kernels.dispatch import ops_for
from bringup.kernels.precision import full_precision_fp32_dots

from .quantized import apply_weight_scheme, dequantised_label, dequantised_weights
from .models import CausalLM, UnsupportedModelError, WeightLoadError, decoder_config, model_class_for

Progress = Callable[[str], None]

# What the engine needs from a hub repository (no PyTorch .bin, no ONNX, no GGUF copies).
HUB_PATTERNS = [
    "config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json",
    "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
    "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja", "chat_template.json",
    "*.py",  # remote-code configs (NemotronH's own) are read as JSON, never executed
]
INDEX_FILE = "model.safetensors.index.json"


@dataclass
class LoadedModel:
    model: CausalLM
    config: dict
    folder: Path
    name: str
    dtype: torch.dtype
    device: torch.device
    load_seconds: float


# Finding the checkpoint --------------------------------------------------------------------------

def resolve_checkpoint(source: str | os.PathLike, *, progress: Progress | None = None) -> Path:
    """The local folder holding config.json and the safetensors: a folder, a config.json path, or a
    hub id downloaded (or found in the cache) with huggingface_hub."""
    text = os.fspath(source).strip()
    if not text:
        raise UserError("no model given; pass a checkpoint folder or a hub id (owner/name)")
    path = Path(text).expanduser()
    if path.is_file() and is_gguf_path(path):
        return path  # a GGUF file is its own checkpoint: config, tokenizer and weights in one
    if path.is_file() and path.name == "config.json":
        path = path.parent
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"{path} has no config.json; point at a Hugging Face checkpoint folder")
        return path
    if path.exists():
        raise UserError(f"{path} is a file; the engine needs the checkpoint folder (config.json + *.safetensors) "
                        "or a .gguf file")
    if "/" not in text:  # `smollm2`: a model the package index ships, once fetched
        from bringup.core.sources.packaged import find_package, packaged_checkpoint

        if find_package(text) is not None:
            return packaged_checkpoint(text)
    from bringup.core.sources.hub import looks_like_hub_id

    if text.startswith((".", "/", "~")) or not looks_like_hub_id(text):
        raise UserError(f"{text}: no such folder, and not a hub id (owner/name); check the path")
    return download_checkpoint(text, progress=progress)


def download_checkpoint(hub_id: str, *, progress: Progress | None = None) -> Path:
    from huggingface_hub import errors as hf_errors
    from huggingface_hub import snapshot_download

    from bringup.core.sources.hub import HUB_ID, _offline, explain, hub_reachable

    match = HUB_ID.match(hub_id)
    repo, revision = match["repo"], match["rev"]
    cache_only = _offline() or not hub_reachable()
    if progress:
        progress(f"{'looking up' if cache_only else 'downloading'} {repo} (config, tokenizer, safetensors)")
    quiet = logging.getLogger("huggingface_hub")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        folder = snapshot_download(repo, revision=revision, allow_patterns=HUB_PATTERNS, local_files_only=cache_only,
                                   tqdm_class=_tqdm_reporting_to(progress) if progress else None)
    except Exception as err:  # noqa: BLE001 - every failure becomes a message
        # hub.explain words its messages for config.json alone; here the whole checkpoint was asked for.
        message = str(explain(err, hub_id, hf_errors))
        message = message.replace("a local config.json or model folder", "a local checkpoint folder")
        message = message.replace("a local file", "a local checkpoint folder")
        raise UserError(message.replace("config.json", "the checkpoint")) from None
    finally:
        quiet.setLevel(level)
    folder = Path(folder)
    if not list(folder.glob("*.safetensors")):
        raise UserError(f"{hub_id} has no safetensors weights (only other formats); convert it or pick another repository")
    return folder


def _tqdm_reporting_to(progress: Progress, every_s: float = 0.5):
    """A tqdm class for huggingface_hub that also reports its counts as progress messages
    (files fetched, megabytes downloaded), at most every `every_s` seconds and at the end."""
    from tqdm.auto import tqdm

    class Reporter(tqdm):
        _said: float | None = None

        def update(self, n=1):
            out = super().update(n)
            now = time.monotonic()
            due = self._said is None or now - self._said >= every_s
            if self.total and (due or self.n >= self.total):
                self._said = now
                what = self.desc or "fetching"
                if self.unit == "B":
                    progress(f"{what}: {self.n / 1e6:.1f} of {self.total / 1e6:.1f} MB")
                else:
                    progress(f"{what}: {self.n} of {self.total}")
            return out

    return Reporter


# Reading it --------------------------------------------------------------------------------------

def decode_special_floats(value):
    """transformers writes inf as {"__float__": "Infinity"}; turn such objects back into floats."""
    if isinstance(value, dict):
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {k: decode_special_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_special_floats(v) for v in value]
    return value


def read_model_config(folder: Path) -> dict:
    if is_gguf_path(folder):
        return read_gguf_config(folder)
    return decode_special_floats(read_config_file(Path(folder) / "config.json"))


def safetensors_files(folder: Path) -> list[Path]:
    folder = Path(folder)
    index = folder / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (ValueError, KeyError) as err:
            raise UserError(f"{index} is not a valid safetensors index ({err}); download the checkpoint again") from None
        files = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise UserError(f"{folder} lacks shard(s) {missing[:4]} listed in {INDEX_FILE}; the download is incomplete")
        return files
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise UserError(f"{folder} has no *.safetensors weights; the engine loads safetensors checkpoints only. "
                        "Point it at a folder saved with save_pretrained(safe_serialization=True), give a hub id "
                        "to download one, or serve 'default' (the bundled checkpoint)")
    return files


def iter_checkpoint(folder: Path, keep_blocks=frozenset()) -> Iterator[tuple[str, torch.Tensor]]:
    """The checkpoint's tensors by name; a GGUF file's `keep_blocks` names as their quantized bytes."""
    if is_gguf_path(folder):
        yield from iter_gguf_weights(folder, keep_blocks=keep_blocks)
        return
    from safetensors import safe_open

    for path in safetensors_files(folder):
        with safe_open(str(path), framework="pt", device="cpu") as f:
            for name in f.keys():
                yield name, f.get_tensor(name)


def resolve_dtype(dtype, config: dict) -> torch.dtype:
    """"auto" is the checkpoint's own dtype (config `dtype` / `torch_dtype`), float32 if unstated."""
    from .pools import as_dtype

    if dtype in (None, "auto"):
        dtype = config.get("dtype") or config.get("torch_dtype") or "float32"
    try:
        resolved = as_dtype(dtype)
    except ValueError as err:
        raise UserError(f"{err}") from None
    if not resolved.is_floating_point:
        raise UserError(f"dtype {dtype} is not a floating-point type; use float32, bfloat16 or float16")
    return resolved


def checkpoint_quantization(config: dict, dtype, device_type: str = "cpu"):
    """(the checkpoint's quantization or None, whether it runs as stored): "auto" keeps the scheme,
    an explicit dtype dequantises (the way to run a scheme the engine cannot run as stored)."""
    from bringup.core.layermap.quantization import read_quantization

    quant = read_quantization(config)
    keep = dtype in (None, "auto")
    if quant is not None and quant.method == "gguf":
        keep = keep and not blocks_not_kept(config, quant, device_type)
    return quant, keep


def blocks_not_kept(config: dict, quant, device_type: str) -> str:
    """Why `--dtype auto` dequantises a GGUF file at load, as an explicit dtype does ("" where its
    blocks stay blocks): they stay where the model's layers take them and the device has products
    for them (the CPU: gguf_weights.py; no GPU kernel yet)."""
    from .facts import gguf_blocks_refused
    from .gguf_weights import KEPT_TYPES

    refused = gguf_blocks_refused(config.get("model_type"), device_type)
    if refused:
        return refused
    if quant.default.weight_dtype not in KEPT_TYPES:
        return (f"its commonest type, {quant.default.weight_dtype}, has no product in the engine "
                f"({', '.join(sorted(KEPT_TYPES))} have)")
    return ""


def model_dtype_for(quant, keep: bool, dt: torch.dtype) -> torch.dtype:
    """The activations' dtype: GGUF blocks kept run with gguf_weights.ACTIVATION_DTYPE."""
    if keep and quant is not None and quant.method == "gguf":
        from .gguf_weights import ACTIVATION_DTYPE

        return ACTIVATION_DTYPE
    return dt


def resolve_device(device) -> torch.device:
    try:
        dev = torch.device(device or "cpu")
    except (RuntimeError, TypeError) as err:
        raise UserError(f"device {device!r} is not a torch device ({err}); use cpu, cuda, cuda:N or xpu") from None
    if dev.type != "cpu":
        module = getattr(torch, dev.type, None)
        if module is None or not module.is_available():
            raise UserError(f"device {dev} is not available in this torch build; run `bringup probe` to see devices")
    return dev


# Building it -------------------------------------------------------------------------------------

def build_model(config: dict, *, device="cpu", dtype=torch.float32, ops=None, name: str = "",
                source: str = "", quantization=None) -> CausalLM:
    """Our model for `config`, allocated (uninitialised) on `device` in `dtype`. Its layers are the
    ones the config's layer map lists (`model.layer_map`, named `name`, from `source`).
    `quantization` (core/layermap/quantization.py): the checkpoint's weight scheme, run as stored
    (quantized.py; a scheme the engine cannot run is refused here, before anything is allocated)."""
    from bringup.core.families import build_layer_map

    config = decoder_config(config)
    try:
        cls = model_class_for(config)
    except UnsupportedModelError as err:
        raise UserError(str(err)) from None
    layer_map = build_layer_map(config, name=name, source=source)
    device = torch.device(device)
    if dtype == torch.float32:  # before any kernel compiles: Triton's float32 dots default to tf32
        full_precision_fp32_dots(device.type)
    with torch.device("meta"):
        try:
            model = cls(config, ops or ops_for(device), layer_map)
        except (ValueError, KeyError, AttributeError, TypeError) as err:
            raise UserError(f"config.json does not describe a {cls.__name__} the engine can build: {err}") from None
    model.to(dtype=dtype)
    model.apply_float32_exceptions()
    model.weight_scheme = apply_weight_scheme(model, quantization, config.get("model_type", ""))
    # to_empty, but through torch.empty: empty_like of a meta tensor imports sympy (~0.5 s of every
    # engine start on a CPU). Parameters built on meta are contiguous, so nothing else changes.
    model._apply(lambda t: torch.empty(t.shape, dtype=t.dtype, device=device))
    model.tie_weights()
    return model.eval()


def load_model(source, *, device="cpu", dtype="auto", progress: Progress | None = None) -> LoadedModel:
    """The checkpoint's model with its weights (random weights instead: model_source.load_model)."""
    started = time.monotonic()
    folder = resolve_checkpoint(source, progress=progress)
    config = decoder_config(read_model_config(folder))
    dev, dt = resolve_device(device), resolve_dtype(dtype, config)
    quant, keep = checkpoint_quantization(config, dtype, dev.type)
    dt = model_dtype_for(quant, keep, dt)
    if progress:
        progress(f"building {config.get('model_type')} on {dev} in {str(dt).removeprefix('torch.')}")
    name = Path(os.fspath(source)).name if Path(os.fspath(source)).expanduser().exists() else os.fspath(source)
    model = build_model(config, device=dev, dtype=dt, name=name, source=str(folder), quantization=quant if keep else None)
    from .gguf_weights import kept_block_names

    weights = iter_checkpoint(folder, keep_blocks=kept_block_names(model))
    if quant is not None and not keep:
        if quant.method != "gguf":  # (a GGUF reader dequantises what it is not asked to keep)
            weights = dequantised_weights(weights, quant, dt)
        model.weight_scheme.dequantised_from = dequantised_label(quant)
    if progress:
        progress(f"loading weights from {folder}")
    try:
        with torch.no_grad():
            model.load_weights(weights)
    except WeightLoadError as err:
        raise UserError(f"{folder}: {err}") from None
    return LoadedModel(model, config, folder, name, dt, dev, time.monotonic() - started)


def load_tokenizer(folder: Path):
    """The checkpoint's tokenizer through transformers (chat template included)."""
    if is_gguf_path(folder):
        return load_gguf_tokenizer(folder)
    from transformers import AutoTokenizer

    vocab_files = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
    if not any((Path(folder) / name).is_file() for name in vocab_files):
        # transformers 5 would build an empty one-token tokenizer from the config alone.
        raise UserError(f"{folder}: no tokenizer files ({', '.join(vocab_files)}); copy the model's tokenizer "
                        "into the folder or download the full checkpoint")
    try:
        return AutoTokenizer.from_pretrained(str(folder))
    except Exception as err:  # noqa: BLE001 - many formats, many errors: one message
        raise UserError(f"{folder}: cannot load a tokenizer ({type(err).__name__}: {str(err)[:200]}); "
                        "the folder needs tokenizer.json or tokenizer_config.json with its vocabulary") from None


def parameter_count(model: CausalLM) -> int:
    """The checkpoint's weights the model holds, counted as values: a kept GGUF layer's parameter is
    its blocks' bytes, or an empty stand-in once its CPU form holds them, so it counts as the
    [out, in] (or [vocab, dim]) matrix it encodes; a tied head counts once."""
    from .gguf_weights import GgufEmbedding, GgufLinear

    seen, total = set(), 0
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            if name == "weight" and isinstance(module, GgufLinear):
                total += module.out_features * module.in_features
            elif name == "weight" and isinstance(module, GgufEmbedding):
                total += module.num_embeddings * module.embedding_dim
            else:
                total += p.numel()
    return total


def weights_bytes(model: CausalLM) -> int:
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel() * p.element_size()
    return total


