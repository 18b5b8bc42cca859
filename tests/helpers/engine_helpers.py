"""Tiny random-weight checkpoints for the engine tests, written with transformers' own classes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

# Mamba, attention, MoE and MLP blocks, two of each mixer, in a short NemotronH stack.
SHORT_PATTERN = "M*EM-*E"


def tiny_nemotron_h(folder: Path, pattern: str = SHORT_PATTERN) -> Path:
    from bringup.core.sources.default_model import TINY_TEST_SPEC, build_checkpoint

    build_checkpoint(folder, replace(TINY_TEST_SPEC, pattern=pattern, chunk_size=8))
    return folder


def tiny_llama_config(vocab_size: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
        initializer_range=0.15, bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
    )


def tiny_llama(folder: Path) -> Path:
    import torch
    from transformers import LlamaForCausalLM

    from bringup.core.sources.default_model import build_tokenizer

    tokenizer = build_tokenizer(512)
    config = tiny_llama_config(len(tokenizer))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        model = LlamaForCausalLM(config).float()
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def hf_greedy(folder: Path, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """transformers' own greedy `generate`, one prompt at a time, never stopping at EOS."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    torch_fallbacks_on_cpu(model)
    outs = []
    with torch.inference_mode():
        for ids in prompts:
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=max_new_tokens, do_sample=False)
            outs.append(out[0, len(ids):].tolist())
    return outs


def prompts_of_lengths(lengths, vocab: int, seed: int = 0) -> list[list[int]]:
    import random

    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(n)] for n in lengths]


def tiny_qwen3_next_config(vocab_size: int):
    """Three gated DeltaNet layers and one gated attention layer, MoE (shared expert) on every other."""
    from transformers import Qwen3NextConfig

    return Qwen3NextConfig(
        vocab_size=vocab_size, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, intermediate_size=96, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=16, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=48, decoder_sparse_step=2,
        max_position_embeddings=1024, initializer_range=0.15, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )


def tiny_qwen3_next(folder: Path) -> Path:
    """A tiny_qwen3_next_config checkpoint with the bundled tokenizer."""
    import torch
    from transformers import Qwen3NextForCausalLM

    from bringup.core.sources.default_model import build_tokenizer

    tokenizer = build_tokenizer(512)
    config = tiny_qwen3_next_config(len(tokenizer))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        model = Qwen3NextForCausalLM(config).float()
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_lfm2_config(vocab_size: int):
    """Short-conv blocks around one attention layer."""
    from transformers import Lfm2Config

    return Lfm2Config(
        vocab_size=vocab_size, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, block_multiple_of=16, conv_L_cache=3, layer_types=["conv", "full_attention", "conv", "conv"],
        max_position_embeddings=1024, initializer_range=0.15, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )


def tiny_lfm2(folder: Path) -> Path:
    """A tiny_lfm2_config checkpoint with the bundled tokenizer."""
    import torch
    from transformers import Lfm2ForCausalLM

    from bringup.core.sources.default_model import build_tokenizer

    tokenizer = build_tokenizer(512)
    config = tiny_lfm2_config(len(tokenizer))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        model = Lfm2ForCausalLM(config).float()
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_sliding(folder: Path, model_type: str = "gemma3_text", window: int = 8) -> Path:
    """A tiny Gemma 3 (text) or gpt-oss with sliding-window layers beside full ones (so the engine
    gives them an SWA pool), random weights large enough that greedy tokens are decisive."""
    import torch
    import transformers

    from bringup.core.sources.default_model import build_tokenizer

    tokenizer = build_tokenizer(512)
    common = dict(vocab_size=len(tokenizer), hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=8, intermediate_size=48, sliding_window=window, max_position_embeddings=1024,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if model_type == "gpt_oss":
        config = transformers.GptOssConfig(**common, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2)
        cls = transformers.GptOssForCausalLM
    else:
        config = transformers.Gemma3TextConfig(**common, num_hidden_layers=3, layer_types=[
            "sliding_attention", "sliding_attention", "full_attention"])
        cls = transformers.Gemma3ForCausalLM
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        model = cls(config).float()
        g = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() >= 2:
                    p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
                elif "norm" not in name:
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def torch_fallbacks_on_cpu(model) -> list[str]:
    """Make a CPU transformers model call its own torch fallbacks instead of fla / mamba_ssm.

    transformers (5.24, 5.25) binds a kernel package's function at import whenever the package is
    installed, whatever device the model later runs on; on a GPU machine with fla installed the
    CPU reference then hands CPU tensors to Triton ("Pointer argument cannot be accessed from
    Triton"). The wrapper keeps the torch function as `__wrapped__` and records its choice in the
    closure (`is_new_implementation`); where it chose a package, the module gets the torch
    function back. Returns the names switched (none where no package is installed).
    """
    import sys

    module = sys.modules[type(model).__module__]
    switched = []
    for name, fn in list(vars(module).items()):
        fn = _closed_over(getattr(type(fn), "forward", None), "func") or fn
        if getattr(fn, "__wrapped__", None) is not None and _closed_over(fn, "is_new_implementation") is True:
            setattr(module, name, fn.__wrapped__)
            switched.append(name)
    return switched


def _closed_over(fn, name: str):
    """The value `fn`'s closure holds under `name`, else None.

    From transformers 5.25, which depends on Hugging Face's `kernels`, the wrapper above comes back
    once more wrapped, in a `kernels` module object (`Func`) whose forward closes over it as `func`.
    """
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
    if code is None or not cells:
        return None
    return dict(zip(code.co_freevars, (c.cell_contents for c in cells))).get(name)
