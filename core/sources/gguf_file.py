"""A llama.cpp GGUF file as a model source: its config, tokenizer and weights, read with `gguf`.

A GGUF file carries everything in one place: metadata keys (`llama.block_count`, ...), the
tokenizer (`tokenizer.ggml.*`, with its chat template) and the tensors, quantised or not, under
llama.cpp's names (`blk.N.attn_q.weight`). This module turns the metadata into the config.json the
rest of the workbench reads (so the map, the planner and the engine need nothing GGUF-specific),
and the tensors into (Hugging Face name, dequantised tensor) pairs for the engine's
`load_weights`. llama.cpp's converter permutes the rows of q and k for the `llama` architecture
(it pairs rotary dimensions as (0,1),(2,3)... where transformers pairs (0, d/2)); the weights are
permuted back here. The tokenizer comes through transformers' GGUF conversion.

Importing this module is cheap: `gguf` (numpy) is imported when a file is read, torch only by
the weight iterator.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from bringup.core.errors import UserError
from bringup.core.sources.gguf_checks import (check_relations, check_tensors, checked_scalar, checked_token_id,
                                              field_contents)

GGUF_MAGIC = b"GGUF"

# llama.cpp architecture -> (model_type, architectures entry). Everything else is refused with a
# message naming what is supported.
ARCHITECTURES = {
    "llama": ("llama", "LlamaForCausalLM"),
    "mistral": ("mistral", "MistralForCausalLM"),
    "qwen2": ("qwen2", "Qwen2ForCausalLM"),
    "qwen3": ("qwen3", "Qwen3ForCausalLM"),
    "qwen3moe": ("qwen3_moe", "Qwen3MoeForCausalLM"),
    "gemma3": ("gemma3_text", "Gemma3ForCausalLM"),
}
# Which ones llama.cpp stores with q/k rows permuted (its "normal" rope; the others use NEOX order).
PERMUTED_QK = {"llama", "mistral"}

# `{arch}.suffix` metadata -> config.json key.
_SCALARS = {
    "block_count": "num_hidden_layers",
    "context_length": "max_position_embeddings",
    "embedding_length": "hidden_size",
    "feed_forward_length": "intermediate_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "attention.sliding_window": "sliding_window",
    "rope.freq_base": "rope_theta",
    "expert_count": "num_experts",
    "expert_used_count": "num_experts_per_tok",
    "expert_feed_forward_length": "moe_intermediate_size",
    "vocab_size": "vocab_size",
}
_TOKEN_IDS = {"bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id", "padding_token_id": "pad_token_id"}

# GGUF tensor name (after `blk.N.`) -> Hugging Face name (after `model.layers.N.`).
_LAYER_TENSORS = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "ffn_gate_inp": "mlp.gate",
    # Gemma 3's sandwich norms: after attention, and after the feed-forward block.
    "post_attention_norm": "post_attention_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
# Where an architecture's tensor means something else: in Gemma 3, llama.cpp's `ffn_norm` is the
# norm *before* the feed-forward block (gguf-py's FFN_PRE_NORM shares the name `ffn_norm`), since
# `post_attention_norm` is the one after attention.
_ARCH_LAYER_TENSORS = {"gemma3": {"ffn_norm": "pre_feedforward_layernorm"}}
# llama.cpp's converter stores Gemma's (1 + w) RMSNorm weights as 1 + w (its norm multiplies by the
# weight); checkpoints, and so the engine, hold w. transformers' GGUF loader subtracts the 1 too
# (modeling_gguf_pytorch_utils.py, Gemma2TensorProcessor, transformers 5.24).
NORM_PLUS_ONE = {"gemma3"}
_GLOBAL_TENSORS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_EXPERTS = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}
_BLOCK = re.compile(r"^blk\.(\d+)\.(\w+?)\.(weight|bias)$")


def is_gguf_path(source) -> bool:
    """A path that names a GGUF file: ends in .gguf (any case), or is a file starting with the magic."""
    try:
        path = Path(os.fspath(source)).expanduser()
    except TypeError:
        return False
    if path.suffix.lower() == ".gguf":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _reader(path: Path):
    try:
        from gguf import GGUFReader
    except ImportError:  # pragma: no cover - a dependency of the project
        raise UserError("the gguf package is not installed; run `make run` or `pip install gguf`") from None
    if not path.is_file():
        raise UserError(f"{path}: no such GGUF file; check the path (or `bringup models fetch smollm2` to get one)")
    try:
        return GGUFReader(str(path))
    except (ValueError, OSError, IndexError, KeyError, OverflowError, MemoryError):
        from bringup.core.sources.gguf_header import why_unreadable

        raise UserError(f"{path} is not a readable GGUF file: {why_unreadable(path)}") from None


@lru_cache(maxsize=4)
def _cached_reader(path: str, mtime_ns: int, size: int):
    return _reader(Path(path))


def reader_for(path) -> "object":
    """A GGUFReader, shared by the config, the weights and the tokenizer of one file (parsing the
    tokenizer arrays takes seconds)."""
    path = Path(os.fspath(path)).expanduser().resolve()
    try:
        stat = path.stat()
    except OSError:
        return _reader(path)  # raises the clear message
    return _cached_reader(str(path), stat.st_mtime_ns, stat.st_size)


def forget_readers() -> None:
    """Drop the shared readers (a loaded engine needs them no more; a later read parses again)."""
    _cached_reader.cache_clear()


def _value(reader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        return default
    return field_contents(field, key)


def read_metadata(path) -> dict:
    """The scalar metadata (arrays of the tokenizer left out), for display and tests."""
    reader = reader_for(path)
    out = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.ggml.") and key.endswith(("tokens", "merges", "token_type", "scores")):
            continue
        out[key] = field_contents(field, key)
    return out


def quantisation(reader) -> str:
    """The tensor types the file holds, most common first: 'Q4_1 (210), F32 (61), Q8_0 (1)'."""
    from collections import Counter

    counts = Counter(t.tensor_type.name for t in reader.tensors)
    return ", ".join(f"{name} ({n})" for name, n in counts.most_common())


def tensor_types(reader, arch: str | None) -> dict[str, str]:
    """Hugging Face weight name -> ggml type of each tensor the engine places one to one (expert
    stacks are split at load and left out): the layer map's per-layer schemes read these."""
    out = {}
    for t in reader.tensors:
        target = hf_name(t.name, arch)
        if target is not None:
            out[target] = t.tensor_type.name
    return out


def read_gguf_config(path) -> dict:
    """A Hugging Face style config.json dict built from the file's metadata."""
    path = Path(os.fspath(path)).expanduser()
    reader = reader_for(path)
    arch = _value(reader, "general.architecture")
    if not isinstance(arch, str) or arch not in ARCHITECTURES:
        raise UserError(f"{path}: GGUF architecture {arch!r} is not supported; the workbench reads "
                        f"{', '.join(sorted(ARCHITECTURES))} GGUF files. Use the model's Hugging Face checkpoint instead")
    model_type, architecture = ARCHITECTURES[arch]
    config: dict = {"model_type": model_type, "architectures": [architecture]}
    for suffix, key in _SCALARS.items():
        field = reader.fields.get(f"{arch}.{suffix}")
        if field is not None:
            config[key] = checked_scalar(path, arch, suffix, field)
    for suffix, key in _TOKEN_IDS.items():
        field = reader.fields.get(f"tokenizer.ggml.{suffix}")
        if field is not None:
            config[key] = checked_token_id(path, f"tokenizer.ggml.{suffix}", field)
    if "vocab_size" not in config:
        tokens = reader.fields.get("tokenizer.ggml.tokens")
        if tokens is not None:
            config["vocab_size"] = len(tokens.data)
        else:
            embed = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
            if embed is not None:
                config["vocab_size"] = int(embed.shape[-1])
    missing = [k for k in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size") if k not in config]
    if missing:
        keys = {v: f"{arch}.{k}" for k, v in _SCALARS.items()}
        shown = ", ".join(f"{keys[k]} ({k})" for k in missing)
        raise UserError(f"{path}: GGUF metadata {shown} is missing; expected in every {arch} file "
                        "(llama.cpp's converter writes it): convert the file again, or use the Hugging Face checkpoint")
    check_relations(path, arch, config, has_key_length="head_dim" in config)
    config.setdefault("num_key_value_heads", config["num_attention_heads"])
    config.setdefault("head_dim", config["hidden_size"] // config["num_attention_heads"])
    check_tensors(path, arch, config, reader.tensors)
    _check_placeable(path, arch, reader.tensors)
    _rope_scaling(reader, path, arch, config)
    config["tie_word_embeddings"] = not any(t.name == "output.weight" for t in reader.tensors)
    config["hidden_act"] = "gelu_pytorch_tanh" if arch == "gemma3" else "silu"
    if arch == "qwen2":
        config["attention_bias"] = any(t.name.endswith("attn_q.bias") for t in reader.tensors)
    if arch == "gemma3":
        config.setdefault("sliding_window_pattern", _checked(reader, path, arch, "attention.sliding_window_pattern") or 6)
        config["query_pre_attn_scalar"] = config["head_dim"]
    config["torch_dtype"] = _float_dtype(reader)
    config["gguf"] = {"file": path.name, "architecture": arch, "name": _value(reader, "general.name"),
                      "quantisation": quantisation(reader), "tensor_types": tensor_types(reader, arch)}
    if any(t.name.startswith("rope_freqs") for t in reader.tensors) and "rope_scaling" not in config:
        # llama.cpp stores Llama 3.1's rope scaling as per-frequency factors, not as metadata.
        config["gguf"]["note"] = ("its rope_freqs tensor (Llama 3.1 style rope scaling) is not applied: "
                                  "answers beyond the original context length may degrade")
    return config


def _check_placeable(path, arch: str, tensors) -> None:
    """Every tensor has a place in the engine's model (refused here, before any weight is read)."""
    unknown = [t.name for t in tensors if not t.name.startswith("rope_freqs") and hf_name(t.name, arch) is None
               and not ((m := _BLOCK.match(t.name)) and m.group(2) in _EXPERTS)]
    if unknown:
        shown = ", ".join(unknown[:6]) + (f" and {len(unknown) - 6} more" if len(unknown) > 6 else "")
        raise UserError(f"{path}: GGUF tensors the engine does not know how to place: {shown}; "
                        f"expected llama.cpp's names for a {arch} model (blk.N.attn_q.weight, ...)")


def _checked(reader, path, arch: str, suffix: str):
    field = reader.fields.get(f"{arch}.{suffix}")
    return None if field is None else checked_scalar(path, arch, suffix, field)


def _rope_scaling(reader, path, arch: str, config: dict) -> None:
    kind = _checked(reader, path, arch, "rope.scaling.type")
    if kind in (None, "none"):
        return
    factor = _checked(reader, path, arch, "rope.scaling.factor")
    if not factor:
        return
    scaling = {"rope_type": kind, "factor": factor}
    original = _checked(reader, path, arch, "rope.scaling.original_context_length")
    if original:
        scaling["original_max_position_embeddings"] = original
    config["rope_scaling"] = scaling


def _float_dtype(reader) -> str:
    """The engine's "auto" dtype: the file's own float type where all big tensors share one
    (F16/BF16/F32), else float32 (quantised weights are dequantised without losing more)."""
    kinds = {t.tensor_type.name for t in reader.tensors if len(t.shape) > 1}
    if kinds == {"F16"}:
        return "float16"
    if kinds == {"BF16"}:
        return "bfloat16"
    return "float32"


def hf_name(gguf_name: str, arch: str | None = None) -> str | None:
    """The Hugging Face name of a GGUF tensor of architecture `arch`, or None for one the engine
    derives itself (rope_freqs); expert stacks are handled by `iter_gguf_weights`."""
    for short, long in _GLOBAL_TENSORS.items():
        if gguf_name in (f"{short}.weight", f"{short}.bias"):
            return f"{long}.{gguf_name.rsplit('.', 1)[1]}"
    if gguf_name.startswith("rope_freqs"):
        return None
    m = _BLOCK.match(gguf_name)
    tensors = {**_LAYER_TENSORS, **_ARCH_LAYER_TENSORS.get(arch, {})}
    if m and m.group(2) in tensors:
        return f"model.layers.{m.group(1)}.{tensors[m.group(2)]}.{m.group(3)}"
    return None


def unpermute_qk(weights, n_head: int):
    """Undo llama.cpp's `permute` of q/k rows: per head, its rows went from (half, pair) order to
    (pair, half) order; this puts them back. Works on weights [rows, cols] and biases [rows]."""
    rows = weights.shape[0]
    dim = rows // n_head // 2
    return weights.reshape(n_head, dim, 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def read_data(tensor, file):
    """The tensor's `data` (same dtype and shape) read from the open `file` instead of through the
    reader's memory map: a mapped page counts in the process's resident memory for as long as the
    map lives, so reading every tensor through it held the whole file (98 MiB for SmolLM2) at the
    load's peak; read, only one tensor's bytes are held at a time beyond the model's own."""
    import numpy as np

    view = tensor.data  # (a view of the map: no page of it is read here)
    file.seek(int(tensor.data_offset))
    data = np.fromfile(file, dtype=view.dtype, count=view.size)
    if data.size != view.size:
        raise UserError(f"{file.name}: {tensor.name} ends past the end of the file; the download is incomplete, "
                        "fetch it again")
    return data.reshape(view.shape)


def dequantised(tensor, data=None):
    """A GGUF tensor (its bytes `data`, else its reader's map) as a float numpy array in PyTorch's
    [out, in] layout."""
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    kind = tensor.tensor_type
    data = tensor.data if data is None else data
    if kind in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        data = np.asarray(data)
    else:  # BF16 and the block quantisations come back as float32
        data = dequantize(data, kind)
    shape = tuple(int(d) for d in reversed(tensor.shape))  # GGUF lists dims innermost first
    return data.reshape(shape)


def iter_gguf_weights(path, config: dict | None = None, keep_blocks=frozenset()) -> Iterator[tuple[str, "object"]]:
    """(Hugging Face name, float32 torch tensor) for every weight in the file, q/k un-permuted; the
    names in `keep_blocks` come as the file's own bytes (uint8 rows of quantized blocks) instead."""
    import numpy as np
    import torch

    reader = reader_for(path)
    arch = _value(reader, "general.architecture")
    config = config or read_gguf_config(path)
    heads, kv_heads = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    # The weights are the last thing a load reads from the parsed file: with only its tensors held,
    # the rest of the reader (the tokenizer arrays: 160 MiB for SmolLM2) goes before the weights come.
    tensors = reader.tensors
    del reader
    forget_readers()
    unknown = []
    with open(Path(os.fspath(path)).expanduser(), "rb") as file:
        for tensor in tensors:
            name = tensor.name
            m = _BLOCK.match(name)
            if m and m.group(2) in _EXPERTS:  # [experts, out, in]: one expert at a time, as checkpoints hold them
                data = dequantised(tensor, read_data(tensor, file))
                for e in range(data.shape[0]):
                    yield (f"model.layers.{m.group(1)}.mlp.experts.{e}.{_EXPERTS[m.group(2)]}.weight",
                           torch.from_numpy(np.array(data[e], dtype=np.float32, order="C")))
                continue
            target = hf_name(name, arch)
            if target is None:
                if not name.startswith("rope_freqs"):
                    unknown.append(name)
                continue
            data = read_data(tensor, file)
            data = data if target in keep_blocks else dequantised(tensor, data)
            if arch in PERMUTED_QK and m and m.group(2) in ("attn_q", "attn_k"):
                data = unpermute_qk(data, heads if m.group(2) == "attn_q" else kv_heads)
            if arch in NORM_PLUS_ONE and target.endswith("norm.weight"):
                data = data - 1.0
            # rows of blocks stay whole through the row permutes; the rest as float32
            yield target, torch.from_numpy(np.ascontiguousarray(data, dtype=None if target in keep_blocks else np.float32))
    if unknown:
        shown = ", ".join(unknown[:6]) + (f" and {len(unknown) - 6} more" if len(unknown) > 6 else "")
        raise UserError(f"{path}: GGUF tensors the engine does not know how to place: {shown}")


def load_gguf_tokenizer(path):
    """The file's tokenizer (vocabulary, merges, special tokens, chat template) through
    transformers' GGUF conversion."""
    path = Path(os.fspath(path)).expanduser()
    try:
        from transformers import AutoTokenizer, PreTrainedTokenizerFast
    except ImportError:  # pragma: no cover - a dependency of the project
        raise UserError("transformers is not installed; run `make run`") from None
    try:
        # The fast class reads only the tokenizer arrays (0.3 s for SmolLM2); AutoTokenizer first
        # builds the model config from the whole file (6 s). The same conversion either way; the
        # tests compare the two.
        return PreTrainedTokenizerFast.from_pretrained(str(path.parent), gguf_file=path.name)
    except Exception:  # noqa: BLE001 - an architecture the fast route does not know: the long way
        pass
    try:
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except Exception as err:  # noqa: BLE001 - many tokenizer kinds, many errors: one message
        raise UserError(f"{path}: cannot build a tokenizer from the GGUF metadata ({type(err).__name__}: "
                        f"{str(err)[:200]}); the file may lack tokenizer.ggml.* keys") from None


def model_name(path) -> str:
    """What to call the model: the file's name without .gguf (it carries the quantisation)."""
    name = Path(os.fspath(path)).name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name
