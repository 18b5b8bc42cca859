"""Tiny GGUF files for the tests, written with the `gguf` writer the way llama.cpp's converter writes
them: a random-weight transformers Llama (or Qwen3) checkpoint, its q/k rows permuted for the
`llama` architecture, the matrices quantised (Q8_0, Q4_0) or F16, and a small byte-level BPE
tokenizer with a chat template in the metadata."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import torch

# The checkpoint's names -> llama.cpp's (per layer after `model.layers.N.`, `blk.N.`).
_LAYER = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}
# Gemma 3's sandwich norms, as llama.cpp names them (its `ffn_norm` is the pre-feed-forward norm).
_GEMMA3_LAYER = {**_LAYER, "post_attention_layernorm": "post_attention_norm",
                 "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm"}
_GLOBAL = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Where each block type keeps its fp16 scales inside a block (the rest of the bytes are codes: any value).
SCALE_FIELDS = {"Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q4_K": (0, 2), "Q6_K": (208,)}


def random_blocks(ggml_type: str, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """Seeded random blocks of a type, uint8 [rows, row bytes]: codes any value, the fp16 scales in
    1e-3..1.1e-2 (so that the weights stay of a sane size)."""
    from bringup.kernels.reference.gguf_blocks import BLOCKS

    per, size = BLOCKS[ggml_type]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(rows, cols // per, size), dtype=np.uint8)
    for off in SCALE_FIELDS[ggml_type]:
        scales = (rng.random((rows, cols // per)) * 0.01 + 1e-3).astype(np.float16)
        raw[..., off:off + 2] = scales.view(np.uint8).reshape(rows, cols // per, 2)
    return raw.reshape(rows, -1)


def gguf_name(name: str, arch: str = "llama") -> str:
    stem, kind = name.rsplit(".", 1)
    if stem in _GLOBAL:
        return f"{_GLOBAL[stem]}.{kind}"
    _, _, layer, rest = stem.split(".", 3)
    return f"blk.{layer}.{(_GEMMA3_LAYER if arch == 'gemma3' else _LAYER)[rest]}.{kind}"


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's `permute` (convert_hf_to_gguf.py, LlamaModel): rotary pairs (i, i + d/2) become
    adjacent rows."""
    return weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def byte_level_vocab(vocab_size: int = 320) -> tuple[list[str], list[str]]:
    """(tokens by id, merges) of a byte-level BPE trained on the project's corpus, specials first."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from bringup.core.sources.default_model import corpus_text

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(corpus_text().splitlines(keepends=True), trainer=trainer)
    model = json.loads(core.to_str())["model"]
    tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, merges


def write_gguf(hf_model, path: Path, tokens: list[str], merges: list[str], *, quant: str = "mixed") -> Path:
    """`hf_model` (transformers Llama, Qwen3 or Gemma 3 text) as a GGUF file. quant: "f32" (every
    tensor exact), "mixed" (embedding Q8_0, attention Q4_0 where rows allow, MLP F16, norms F32), or
    "blocks" (as mixed, the MLP and an untied lm_head Q4_1), "q5" (as blocks, the MLP's down
    projection Q5_0 and the attention's output Q5_1, a type the engine keeps no blocks of), or "kquants" (embedding and attention
    Q8_0, the MLP's gate and up Q4_K, its down and an untied lm_head Q6_K; gguf-py cannot quantise the
    K types, so theirs are seeded random blocks: text is noise, the products still checkable; the
    matrices' columns a multiple of 256).
    Gemma 3 as llama.cpp's converter writes it: norms stored as 1 + w, the window and its pattern."""
    import gguf
    from gguf.quants import quantize

    cfg = hf_model.config
    arch = {"llama": "llama", "qwen3": "qwen3", "gemma3_text": "gemma3"}[cfg.model_type]
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"tiny-{arch}")
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    rope = getattr(cfg, "rope_parameters", None) or {}
    rope = rope.get("full_attention", rope)  # Gemma 3: the full layers' base (llama.cpp fixes the local one)
    theta = rope.get("rope_theta") or getattr(cfg, "rope_theta", 10000.0)
    if arch == "gemma3":
        writer.add_sliding_window(cfg.sliding_window)
        kinds = cfg.layer_types
        writer.add_uint32("gemma3.attention.sliding_window_pattern", kinds.index("full_attention") + 1)
    writer.add_rope_freq_base(float(theta))
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quant == "mixed" else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIALS else 1 for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index("<|im_start|>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_pad_token_id(tokens.index("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    state = hf_model.state_dict()
    for name, tensor in state.items():
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        data = tensor.detach().float().numpy()
        if arch == "gemma3" and name.endswith("norm.weight"):
            data = data + 1.0
        if arch == "llama" and ".q_proj." in name:
            data = permute(data, cfg.num_attention_heads)
        elif arch == "llama" and ".k_proj." in name:
            data = permute(data, cfg.num_key_value_heads)
        kind = gguf.GGMLQuantizationType.F32
        if quant == "kquants" and data.ndim == 2:
            kind = gguf.GGMLQuantizationType.Q8_0 if "embed_tokens" in name or "self_attn" in name else (
                gguf.GGMLQuantizationType.Q4_K if "gate_proj" in name or "up_proj" in name else gguf.GGMLQuantizationType.Q6_K)
            if kind != gguf.GGMLQuantizationType.Q8_0:
                blocks = random_blocks(kind.name, *data.shape, seed=zlib.crc32(name.encode()))
                writer.add_tensor(gguf_name(name, arch), blocks, raw_dtype=kind)
                continue
        elif quant in ("mixed", "blocks", "q5") and data.ndim == 2:
            if "embed_tokens" in name:
                kind = gguf.GGMLQuantizationType.Q8_0
            elif quant == "q5" and "o_proj" in name and data.shape[1] % 32 == 0:
                kind = gguf.GGMLQuantizationType.Q5_1
            elif "self_attn" in name and data.shape[1] % 32 == 0:
                kind = gguf.GGMLQuantizationType.Q4_0
            elif quant == "q5" and "down_proj" in name and data.shape[1] % 32 == 0:
                kind = gguf.GGMLQuantizationType.Q5_0
            elif quant in ("blocks", "q5") and data.shape[1] % 32 == 0:
                kind = gguf.GGMLQuantizationType.Q4_1
            else:
                kind = gguf.GGMLQuantizationType.F16
        if kind == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(gguf_name(name, arch), np.ascontiguousarray(data, dtype=np.float32))
        elif kind == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(gguf_name(name, arch), data.astype(np.float16))
        else:
            writer.add_tensor(gguf_name(name, arch), quantize(data, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tiny_llama(vocab_size: int, *, model_type: str = "llama", seed: int = 2, **overrides):
    """A random transformers model, weights large enough that greedy choices are decisive."""
    import transformers
    from models_helpers import randomize

    sizes = dict(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, intermediate_size=96, max_position_embeddings=256,
                 rope_theta=10000.0, tie_word_embeddings=False)
    sizes.update(overrides)
    config_cls, model_cls = {"llama": ("LlamaConfig", "LlamaForCausalLM"),
                             "qwen3": ("Qwen3Config", "Qwen3ForCausalLM")}[model_type]
    torch.manual_seed(0)
    hf = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**sizes)).eval()
    randomize(hf, seed=seed)
    return hf
