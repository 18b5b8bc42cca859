"""The checks a GGUF file's metadata and tensor list pass before anything is computed from them.

Each metadata key that becomes a config field has a kind (a count, a positive float, a token id),
checked where it is read; the relations the engine's modules assume (heads divisible by KV heads,
the experts used among the experts, token ids inside the vocabulary) are checked next; then every
tensor the engine places must have the shape the metadata implies. A failure names the key (or the
tensor), what it holds and what was expected, so a hand-edited or badly converted file is refused
before loading with a message, never a traceback from the arithmetic that would follow.
"""

from __future__ import annotations

import math
import re

from bringup.core.errors import UserError

# `{arch}.suffix` metadata that must be a positive whole number (a size or a count).
COUNTS = {"block_count", "context_length", "embedding_length", "feed_forward_length", "attention.head_count",
          "attention.head_count_kv", "attention.key_length", "attention.sliding_window", "expert_count",
          "expert_used_count", "expert_feed_forward_length", "vocab_size", "rope.scaling.original_context_length",
          "attention.sliding_window_pattern"}
POSITIVE_FLOATS = {"attention.layer_norm_rms_epsilon", "rope.freq_base", "rope.scaling.factor"}
TEXTS = {"rope.scaling.type"}
_INTEGER_TYPES = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64"}
_FLOAT_TYPES = {"FLOAT32", "FLOAT64"} | _INTEGER_TYPES
_BLOCK = re.compile(r"^blk\.(\d+)\.(\w+?)\.(weight|bias)$")


def checked_scalar(path, arch: str, suffix: str, field):
    """The value of metadata `{arch}.{suffix}` once it has the kind its config field needs."""
    key = f"{arch}.{suffix}"
    kinds = [t.name for t in field.types]
    if suffix in COUNTS:
        if kinds[:1] == ["ARRAY"]:
            raise _bad(path, key, "a per-layer list", "one whole number for every layer (per-layer sizes are not supported)")
        if kinds != [k for k in kinds if k in _INTEGER_TYPES] or len(kinds) != 1:
            raise _bad(path, key, _shown(field), "a whole number")
        value = int(field.contents())
        if value < 1:
            raise _bad(path, key, value, "a whole number of at least 1")
        return value
    if suffix in POSITIVE_FLOATS:
        if len(kinds) != 1 or kinds[0] not in _FLOAT_TYPES:
            raise _bad(path, key, _shown(field), "a positive number")
        value = float(field.contents())
        if not (math.isfinite(value) and value > 0):
            raise _bad(path, key, value, "a positive finite number")
        return value
    if suffix in TEXTS:
        if [k for k in kinds] != ["STRING"]:
            raise _bad(path, key, _shown(field), "a text")
    return field_contents(field, key)


def field_contents(field, key: str):
    """A metadata field's value; a text that is not UTF-8 (gguf decodes strings lazily, here) is refused."""
    try:
        return field.contents()
    except UnicodeDecodeError:  # a flipped byte inside a text value
        raise UserError(f"GGUF metadata {key} holds text that is not UTF-8: the file is damaged; "
                        "fetch or convert it again") from None


def checked_token_id(path, key: str, field) -> int:
    kinds = [t.name for t in field.types]
    if len(kinds) != 1 or kinds[0] not in _INTEGER_TYPES or int(field.contents()) < 0:
        raise _bad(path, key, _shown(field), "a token id (a whole number from 0)")
    return int(field.contents())


def check_relations(path, arch: str, config: dict, has_key_length: bool) -> None:
    """What the modules assume of the sizes together, before head_dim or anything else is derived."""
    heads, kv = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    if heads % kv:
        raise UserError(f"{path}: GGUF metadata {arch}.attention.head_count_kv is {kv}, which does not divide "
                        f"{arch}.attention.head_count ({heads}); expected a divisor of {heads} "
                        "(each KV head serves a whole group of query heads)")
    if not has_key_length and config["hidden_size"] % heads:
        raise UserError(f"{path}: GGUF metadata {arch}.embedding_length ({config['hidden_size']}) is not a multiple of "
                        f"{arch}.attention.head_count ({heads}), and no {arch}.attention.key_length says the head size")
    experts, used = config.get("num_experts"), config.get("num_experts_per_tok")
    if used is not None and (experts is None or used > experts):
        raise UserError(f"{path}: GGUF metadata {arch}.expert_used_count is {used}, but {arch}.expert_count is "
                        f"{experts if experts is not None else 'missing'}; expected at most as many experts used as there are")
    vocab = config["vocab_size"]
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        token = config.get(key)
        if token is not None and token >= vocab:
            name = {"pad_token_id": "padding_token_id"}.get(key, key)
            raise UserError(f"{path}: GGUF metadata tokenizer.ggml.{name} is {token}, outside the vocabulary of "
                            f"{vocab} tokens; expected an id below {vocab}")


def expected_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Tensor (GGUF name without `blk.N.` and `.weight`) -> [out, in] shape the config implies."""
    hidden, heads, hd = config["hidden_size"], config["num_attention_heads"], config["head_dim"]
    kv, vocab = config.get("num_key_value_heads", heads), config["vocab_size"]
    shapes = {"token_embd": (vocab, hidden), "output": (vocab, hidden), "output_norm": (hidden,),
              "attn_norm": (hidden,), "ffn_norm": (hidden,), "post_attention_norm": (hidden,), "post_ffw_norm": (hidden,),
              "attn_q": (heads * hd, hidden), "attn_k": (kv * hd, hidden), "attn_v": (kv * hd, hidden),
              "attn_output": (hidden, heads * hd), "attn_q_norm": (hd,), "attn_k_norm": (hd,)}
    if "intermediate_size" in config:
        ffn = config["intermediate_size"]
        shapes.update(ffn_gate=(ffn, hidden), ffn_up=(ffn, hidden), ffn_down=(hidden, ffn))
    if "num_experts" in config:
        experts = config["num_experts"]
        shapes["ffn_gate_inp"] = (experts, hidden)
        if "moe_intermediate_size" in config:
            moe = config["moe_intermediate_size"]
            shapes.update(ffn_gate_exps=(experts, moe, hidden), ffn_up_exps=(experts, moe, hidden),
                          ffn_down_exps=(experts, hidden, moe))
    return shapes


def check_tensors(path, arch: str, config: dict, tensors) -> None:
    """Every tensor the engine places has the shape the metadata implies, in a block that exists."""
    shapes = expected_shapes(config)
    layers = config["num_hidden_layers"]
    blocks = {int(m.group(1)) for t in tensors if (m := _BLOCK.match(t.name))}
    if blocks and blocks != set(range(layers)) and max(blocks) < layers:
        held = f"blocks 0 to {max(blocks)}" if blocks == set(range(max(blocks) + 1)) else f"{len(blocks)} of them"
        raise UserError(f"{path}: GGUF metadata {arch}.block_count is {layers}, but the file holds tensors for {held}; "
                        f"expected the tensors of every block (the metadata and the tensors disagree)")
    for tensor in tensors:
        name = tensor.name
        shape = tuple(int(d) for d in reversed(list(tensor.shape)))  # GGUF lists dims innermost first
        m = _BLOCK.match(name)
        if m:
            if int(m.group(1)) >= layers:
                raise UserError(f"{path}: GGUF tensor {name} is in block {m.group(1)}, but {arch}.block_count says "
                                f"{layers} blocks (0 to {layers - 1}); the metadata and the tensors disagree")
            short, part = m.group(2), m.group(3)
        else:
            short, _, part = name.rpartition(".")
        want = shapes.get(short)
        if want is None:
            continue  # placed or refused by the weight reader (which names tensors it cannot place)
        if part == "bias":
            want = want[:-1] if len(want) > 1 else want
        if shape != want:
            raise UserError(f"{path}: GGUF tensor {name} has shape {list(shape)}, but the metadata implies "
                            f"{list(want)} ({_because(arch, short)}); the metadata and the tensors disagree, "
                            "so the file was converted or edited wrongly")


def _because(arch: str, short: str) -> str:
    if short in ("attn_q", "attn_output"):
        return f"{arch}.attention.head_count x {arch}.attention.key_length, {arch}.embedding_length"
    if short in ("attn_k", "attn_v"):
        return f"{arch}.attention.head_count_kv x {arch}.attention.key_length, {arch}.embedding_length"
    if short in ("token_embd", "output"):
        return f"{arch}.vocab_size or the token list, {arch}.embedding_length"
    if "exps" in short or short == "ffn_gate_inp":
        return f"{arch}.expert_count, {arch}.expert_feed_forward_length, {arch}.embedding_length"
    if short.startswith("ffn_"):
        return f"{arch}.feed_forward_length, {arch}.embedding_length"
    if short.endswith("_norm") and short.startswith("attn_"):
        return f"{arch}.attention.key_length"
    return f"{arch}.embedding_length"


def _bad(path, key: str, found, expected: str) -> UserError:
    return UserError(f"{path}: GGUF metadata {key} is {found}; expected {expected}. "
                     "The file was converted or edited wrongly: convert it again, or use the Hugging Face checkpoint")


def _shown(field) -> str:
    kinds = "/".join(t.name.lower() for t in field.types)
    try:
        value = field.contents()
    except (ValueError, IndexError, UnicodeDecodeError):
        return f"a {kinds}"
    text = repr(value)
    return f"{text[:40]}{'...' if len(text) > 40 else ''} (a {kinds})"
