"""Helpers of the check-kernels coverage tests: an engine as the check builds it, an independent
census of the kernels it calls, and tiny checkpoints the engine helpers do not build."""

from __future__ import annotations

import os

import torch

from bringup.core.sources.default_model import build_tokenizer
from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.numerics.kernels_child import engine_settings, run_workload

DEVICE = os.environ.get("BRINGUP_TEST_DEVICE", "cpu")


def engine_for(folder, dtype="float32", device=DEVICE, long_prefill=0) -> Engine:
    """An engine as check-kernels' child builds one (small pools, eager decode: graphs call no ops)."""
    return Engine(EngineConfig(str(folder), device=device, dtype=dtype, **engine_settings(long_prefill)))


def kernels_the_engine_calls(engine) -> set[tuple[str, str]]:
    """(op, phase) of every function of the model's op namespace called for the check's workload,
    seen by wrapping each one here (not by the recorder under test)."""
    ops = engine.model.ops
    called, decode = set(), [False]
    hook = engine.model.register_forward_pre_hook(lambda module, args: decode.__setitem__(0, args[0].is_decode_only))
    originals = {name: fn for name, fn in vars(ops).items() if callable(fn)}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            called.add((name, "decode" if decode[0] else "prefill"))
            return fn(*args, **kwargs)
        return wrapper

    for name, fn in originals.items():
        setattr(ops, name, counted(name, fn))
    try:
        run_workload(engine)  # the check's requests (its short prompt and decode step)
    finally:
        for name, fn in originals.items():
            setattr(ops, name, fn)
        hook.remove()
    return called


def _tiny(folder, config_name, model_name, **config):
    """A tiny transformers checkpoint with the engine tests' tokenizer (random weights)."""
    import transformers

    tokenizer = build_tokenizer(512)
    cfg = getattr(transformers, config_name)(vocab_size=len(tokenizer), bos_token_id=1, eos_token_id=2,
                                             pad_token_id=0, **config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        getattr(transformers, model_name)(cfg).float().save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_minimax(folder):
    return _tiny(folder, "MiniMaxConfig", "MiniMaxForCausalLM", hidden_size=48, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=12, intermediate_size=32, num_local_experts=4,
                 num_experts_per_tok=2, block_size=8, layer_types=["linear_attention", "full_attention"],
                 max_position_embeddings=256)


def tiny_gemma2(folder):
    return _tiny(folder, "Gemma2Config", "Gemma2ForCausalLM", hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=8, intermediate_size=48, sliding_window=8,
                 attn_logit_softcapping=5.0, final_logit_softcapping=8.0, max_position_embeddings=256)


def tiny_jamba(folder):
    from hybrid_configs import VARIANTS

    config_name, model_name, config = VARIANTS["jamba"]
    return _tiny(folder, config_name, model_name, **{k: v for k, v in config.items() if k != "vocab_size"})


def tiny_kimi_linear(folder):
    """KDA, MLA, KDA: the short convs and KDA beside latent attention (as tests/core/engine/models/test_models_kimi_linear.py)."""
    linear = {"full_attn_layers": [2], "kda_layers": [1, 3], "num_heads": 2, "head_dim": 8, "short_conv_kernel_size": 4}
    return _tiny(folder, "KimiLinearConfig", "KimiLinearForCausalLM", hidden_size=32, intermediate_size=48,
                 moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=3, num_key_value_heads=3,
                 kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, num_experts=6,
                 num_experts_per_token=2, num_expert_group=2, topk_group=1, routed_scaling_factor=1.7,
                 linear_attn_config=linear, first_k_dense_replace=1)
