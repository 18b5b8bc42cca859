"""`--load-format dummy`: the real architecture at its real size, with seeded random weights.

A bring-up engineer wants the model on the device before the weights arrive. Any source the layer
map reads (catalogue name, config.json, a folder with or without weights, a hub id: config only)
gives a config; the model is built from it on the meta device, checked against the device's free
memory *before* anything is allocated, then allocated once on the target device and filled there
from a seeded generator (never written to disk, never staged on the host).

The values follow the usual initialisation (normal(0, initializer_range) for matrices, ones for
norm weights, zeros for biases, Mamba2's A_log / dt_bias / D in their trained ranges), so the
activations stay finite through all blocks and a step costs what a trained model's step costs.
The text it produces is noise: everything that shows it says "random weights".

The tokenizer is the source folder's (or the hub's) when there is one, else the bundled one,
widened (`VocabCoveringTokenizer`) so that every id below the config's vocab_size decodes.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import torch

from bringup.core.errors import UserError
from bringup.core.engine.models.base import FP8_DTYPES

DEFAULT_SEED = 0
GB = 1024**3
# Weights may take at most this share of the device's free memory: pools and activations need the rest.
MAX_WEIGHT_SHARE = 0.95
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")


def resolve_config(source):
    """LoadedConfig (core.sources.resolve) for any source the layer map reads; catalogue entries
    carry the config facts the engine needs."""
    from bringup.core.sources.resolve import load_config

    return load_config(os.fspath(source) if source is not None else "default")


def plan_bytes(model) -> int:
    """Bytes the model's parameters and buffers take once allocated (ties counted once)."""
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


def check_fits(needed: int, free: int, device, what: str = "the weights", dtype=None) -> None:
    """Refuse before allocating when `needed` bytes exceed the share of `free` weights may take."""
    if needed > MAX_WEIGHT_SHARE * free:
        halve = ", --dtype bfloat16" if dtype == torch.float32 else ""
        raise UserError(
            f"{what} need {needed / GB:.2f} GiB but {device} has {free / GB:.2f} GiB free "
            f"(at most {MAX_WEIGHT_SHARE:.0%} of it goes to weights); use a device with more memory{halve} "
            "or a smaller model"
        )


def _std(config: dict) -> float:
    return float(config.get("initializer_range") or 0.02)


@torch.no_grad()
def fill_dummy_(model, config: dict, seed: int = DEFAULT_SEED) -> None:
    """Fill every parameter in place, on its own device, from a generator seeded with `seed`
    (same seed, same device type, same values)."""
    std = _std(config)
    dev = next(model.parameters()).device
    gen = torch.Generator(device=dev)
    gen.manual_seed(int(seed))
    seen = set()
    params = dict(model.named_parameters())
    for name, p in params.items():
        if id(p) in seen:
            continue
        seen.add(id(p))
        leaf = name.rsplit(".", 1)[-1]
        if p.dtype in FP8_DTYPES:  # drawn in float, stored as the checkpoint's scheme stores it
            scale = params[name + "_scale_inv"]
            seen.add(id(scale))
            _fill_fp8_(p, scale, std, gen)
        elif leaf == "A_log":  # A = -exp(A_log) in [-16, -1], as Mamba2 initialises it
            p.uniform_(1.0, 16.0, generator=gen).log_()
        elif leaf == "dt_bias":  # softplus(dt_bias) = dt in [time_step_min, time_step_max]
            lo = float(config.get("time_step_min", 1e-3))
            hi = float(config.get("time_step_max", 1e-1))
            dt = torch.empty(p.shape, device=dev, dtype=torch.float32).uniform_(
                math.log(lo), math.log(hi), generator=gen).exp_()
            p.copy_(dt + torch.log(-torch.expm1(-dt)))
        elif leaf == "D":
            p.fill_(1.0)
        elif p.dim() == 1 and "norm" in name:  # a scale of 1, also for (1 + w) norms (w = 0, as they initialise)
            p.fill_(1.0 - float(getattr(model, "norm_weight_offset", 0.0)))
        elif leaf in ("bias", "e_score_correction_bias"):
            p.zero_()
        else:
            p.normal_(0.0, std, generator=gen)


def _fill_fp8_(weight, scale, std: float, gen, budget: int = 1 << 26) -> None:
    """Normal(0, std) weights quantised block by block into fp8 + scales, `budget` float32 elements
    at a time (a whole expert stack in float32 would be several GB)."""
    from bringup.kernels.reference.fp8_linear import quantize_fp8_block

    n, k = weight.shape[-2:]
    sn, sk = scale.shape[-2:]
    bn, bk = -(-n // sn), -(-k // sk)  # the block the grid was made for
    flat_w, flat_s = weight.view(-1, n, k), scale.view(-1, sn, sk)
    per = max(1, budget // (n * k))  # matrices at once
    step = n if per > 1 else max(bn, budget // k // bn * bn)  # or rows of one matrix at once
    for e in range(0, flat_w.shape[0], per):
        for r in range(0, n, step):
            count, rows = min(per, flat_w.shape[0] - e), min(step, n - r)
            w = torch.empty(count, rows, k, device=weight.device).normal_(0.0, std, generator=gen)
            q, s = quantize_fp8_block(w, (bn, bk))
            flat_w[e:e + count, r:r + rows].copy_(q)
            flat_s[e:e + count, r // bn:r // bn + s.shape[-2]].copy_(s)


def load_dummy_model(source, *, device="cpu", dtype="auto", seed: int = DEFAULT_SEED, progress=None):
    """LoadedModel (as loader.load_model returns) with random weights; `folder` is the folder the
    config came from (None for the catalogue). Refuses before allocating when it cannot fit."""
    from .loader import LoadedModel, build_model, decode_special_floats, resolve_device, resolve_dtype
    from . import device as devices
    from .models import UnsupportedModelError, model_class_for
    from bringup.kernels.dispatch import ops_for

    started = time.monotonic()
    loaded = resolve_config(source)
    from .models import decoder_config

    config = decoder_config(decode_special_floats(loaded.config))
    dev, dt = resolve_device(device), resolve_dtype(dtype, config)
    from .loader import checkpoint_quantization

    quant, keep = checkpoint_quantization(config, dtype)
    quant = quant if keep and quant is not None and quant.method != "gguf" else None  # random bytes are no GGUF blocks
    try:
        cls = model_class_for(config)
    except UnsupportedModelError as err:
        raise UserError(str(err)) from None
    from bringup.core.families import build_layer_map

    layer_map = build_layer_map(config, name=loaded.name, source=loaded.source)
    with torch.device("meta"):  # the plan: every tensor's size, nothing allocated
        try:
            meta = cls(config, ops_for(dev), layer_map)
        except (ValueError, KeyError, AttributeError, TypeError) as err:
            raise UserError(f"config of {loaded.name} does not describe a {cls.__name__} the engine can build: "
                            f"{err}") from None
        meta.to(dtype=dt)
        meta.apply_float32_exceptions()
        from .quantized import apply_weight_scheme

        apply_weight_scheme(meta, quant, config.get("model_type", ""))  # fp8 layers take their own bytes
    needed = plan_bytes(meta)
    del meta
    free = devices.free_memory(dev)
    if progress:
        progress(f"dummy weights for {loaded.name}: {needed / GB:.2f} GiB on {dev} ({free / GB:.2f} GiB free)")
    check_fits(needed, free, dev, f"{loaded.name}'s weights ({str(dt).removeprefix('torch.')})", dt)
    model = build_model(config, device=dev, dtype=dt, name=loaded.name, source=loaded.source, quantization=quant)
    if quant is None and keep is False and checkpoint_quantization(config, "auto")[0] is not None:
        from .quantized import dequantised_label

        model.weight_scheme.dequantised_from = dequantised_label(checkpoint_quantization(config, "auto")[0])
    fill_dummy_(model, config, seed)
    model.finish_loading()
    named_config = loaded.kind == "file" and Path(os.fspath(source)).name == "config.json"
    folder = loaded.path if loaded.kind in ("folder", "hub") or named_config else None
    if loaded.kind == "hub":
        folder = _hub_tokenizer_folder(os.fspath(source), progress) or folder
    result = LoadedModel(model, config, folder, loaded.name, dt, dev, time.monotonic() - started)
    result.source_kind = loaded.kind  # what the config came from: catalogue | file | folder | hub
    return result


def _hub_tokenizer_folder(hub_id: str, progress=None) -> Path | None:
    """The hub repository's tokenizer files (no weights), or None when they cannot be had."""
    try:
        from huggingface_hub import snapshot_download

        from bringup.core.sources.hub import HUB_ID, _offline, hub_reachable

        match = HUB_ID.match(hub_id)
        if progress:
            progress(f"fetching the tokenizer of {match['repo']}")
        return Path(snapshot_download(match["repo"], revision=match["rev"], allow_patterns=list(TOKENIZER_FILES)
                                      + ["special_tokens_map.json", "merges.txt", "chat_template.jinja"],
                                      local_files_only=_offline() or not hub_reachable()))
    except Exception:  # noqa: BLE001 - no tokenizer from the hub: the bundled one serves
        return None


# Tokenizer ---------------------------------------------------------------------------------------

class VocabCoveringTokenizer:
    """A tokenizer whose vocabulary is smaller than the model's, widened to `vocab_size`: ids it
    does not know decode as the id modulo its own size (random weights sample any id; their text is
    noise either way). Everything else (encode, chat template, special tokens) is the base's."""

    def __init__(self, base, vocab_size: int):
        self._base, self._size, self._vocab_size = base, len(base), int(vocab_size)

    def __getattr__(self, name):
        return getattr(self._base, name)

    def __call__(self, *args, **kwargs):
        return self._base(*args, **kwargs)

    def __len__(self) -> int:
        return max(self._vocab_size, self._size)

    def _fold(self, ids):
        if isinstance(ids, int):
            return ids % self._size
        return [int(i) % self._size for i in ids]

    def decode(self, ids, *args, **kwargs):
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return self._base.decode(self._fold(ids), *args, **kwargs)

    def convert_ids_to_tokens(self, ids, *args, **kwargs):
        return self._base.convert_ids_to_tokens(self._fold(ids), *args, **kwargs)


def bundled_tokenizer():
    """The default model's tokenizer: from its cached checkpoint when built, else trained in memory
    (a second or two; nothing written)."""
    from bringup.core.sources.default_model import DEFAULT_SPEC, build_tokenizer, checkpoint_dir, is_complete

    folder = checkpoint_dir()
    if is_complete(folder):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(folder))
    return build_tokenizer(DEFAULT_SPEC.vocab_size)


def dummy_tokenizer(folder: Path | None, vocab_size: int | None):
    """(tokenizer, where it came from): the folder's own when it has one, else the bundled one,
    covering ids up to `vocab_size`."""
    if folder is not None and any((Path(folder) / n).is_file() for n in TOKENIZER_FILES):
        from .loader import load_tokenizer

        tok, origin = load_tokenizer(folder), f"{folder}"
    else:
        tok, origin = bundled_tokenizer(), "bundled (the default model's)"
    if vocab_size and len(tok) < int(vocab_size):
        tok = VocabCoveringTokenizer(tok, int(vocab_size))
        origin += f", widened to {vocab_size} ids"
    return tok, origin
