"""A small llama GGUF written straight from sizes (no transformers model), with any metadata key
replaced, retyped or left out: what the GGUF fuzz tests draw from."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SIZES = {"block_count": 2, "context_length": 64, "embedding_length": 32, "feed_forward_length": 48,
         "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 8,
         "attention.layer_norm_rms_epsilon": 1e-5, "rope.freq_base": 10000.0, "vocab_size": 40}
TOKEN_IDS = {"bos_token_id": 1, "eos_token_id": 2}
DROP = object()  # a metadata value that means "leave the key out"


def tensor_shapes(s: dict) -> dict[str, tuple[int, ...]]:
    """[out, in] shapes of the tensors a file of sizes `s` holds (the true sizes, whatever the metadata says)."""
    hidden, heads, kv, hd, ffn = (s["embedding_length"], s["attention.head_count"], s["attention.head_count_kv"],
                                  s["attention.key_length"], s["feed_forward_length"])
    shapes = {"token_embd.weight": (s["vocab_size"], hidden), "output_norm.weight": (hidden,)}
    for i in range(s["block_count"]):
        shapes.update({f"blk.{i}.attn_norm.weight": (hidden,), f"blk.{i}.attn_q.weight": (heads * hd, hidden),
                       f"blk.{i}.attn_k.weight": (kv * hd, hidden), f"blk.{i}.attn_v.weight": (kv * hd, hidden),
                       f"blk.{i}.attn_output.weight": (hidden, heads * hd), f"blk.{i}.ffn_norm.weight": (hidden,),
                       f"blk.{i}.ffn_gate.weight": (ffn, hidden), f"blk.{i}.ffn_up.weight": (ffn, hidden),
                       f"blk.{i}.ffn_down.weight": (hidden, ffn)})
    return shapes


def write_small_gguf(path: Path, metadata: dict | None = None) -> Path:
    """A llama GGUF of SIZES; `metadata` maps `llama.<suffix>` or `tokenizer.ggml.<name>` suffixes to a
    replacement value (int, float, str, bool, list) or DROP."""
    import gguf

    metadata = metadata or {}
    writer = gguf.GGUFWriter(str(path), "llama")
    values = {**{f"llama.{k}": v for k, v in SIZES.items()}, **{f"tokenizer.ggml.{k}": v for k, v in TOKEN_IDS.items()}}
    values.update(metadata)
    for key, value in values.items():
        if value is DROP:
            continue
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_int64(key, value) if value < 0 or value >= 2 ** 32 else writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, value)
    rng = np.random.default_rng(0)
    for name, shape in tensor_shapes(SIZES).items():
        writer.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
