"""One tiny random checkpoint per family the engine runs beside NemotronH and the dense models
(issue 10's list), built with transformers' own config and model classes, with the bundled
tokenizer so `bringup serve` can start on the folder. Shared by the serve and dummy-weight tests."""

from __future__ import annotations

from pathlib import Path

from hybrid_configs import VARIANTS as HYBRIDS
from sliding_configs import COMMON as SLIDING_COMMON, VARIANTS as SLIDING

# Every family variant: Granite-4.0-H with and without experts, Bamba, Falcon-H1, Zamba2, Jamba
# (Mamba hybrids) and Gemma 2, Gemma 3 text, gpt-oss (sliding-window attention beside full).
MAMBA_FAMILIES = ("granite_moe", "granite_dense", "bamba", "falcon_h1", "zamba2", "jamba")
SLIDING_FAMILIES = ("gemma2", "gemma3_text", "gpt_oss")
FAMILIES = MAMBA_FAMILIES + SLIDING_FAMILIES


def family_config(name: str, vocab_size: int):
    """transformers config of the family's tiny variant, with `vocab_size` tokens."""
    import transformers

    if name in SLIDING:
        config_cls, _, extra = SLIDING[name]
        cfg = getattr(transformers, config_cls)(**dict(SLIDING_COMMON, **extra, vocab_size=vocab_size))
        cfg._attn_implementation = "eager"
        return cfg
    config_cls, _, kwargs = HYBRIDS[name]
    return getattr(transformers, config_cls)(**dict(kwargs, vocab_size=vocab_size, bos_token_id=1, eos_token_id=2,
                                                    pad_token_id=0))


def family_model(name: str, vocab_size: int, seed: int = 6):
    """transformers' model of the tiny variant, float32, with decisive random weights (models_helpers.randomize)."""
    import torch
    import transformers
    from models_helpers import randomize

    model_cls = (SLIDING.get(name) or HYBRIDS[name])[1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        hf = getattr(transformers, model_cls)(family_config(name, vocab_size)).float().eval()
    randomize(hf, seed=seed)
    if name == "gpt_oss":  # sinks large enough to matter
        with torch.no_grad():
            for layer in hf.model.layers:
                layer.self_attn.sinks.copy_(torch.linspace(-1.0, 2.0, layer.self_attn.sinks.numel()))
    return hf


def family_checkpoint(name: str, folder: Path, tokenizer):
    """Write the tiny variant (weights, config, `tokenizer`) to `folder`; returns transformers' model."""
    hf = family_model(name, len(tokenizer))
    hf.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return hf
