"""Shared pieces for the planner tests: real configs in place, and a tiny NemotronH config."""

from __future__ import annotations

from pathlib import Path

from repo_paths import SHARED_MODELS

MODELS = SHARED_MODELS
NANO = MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"
GIB = 1024**3


def tiny_nemotron_config(pattern: str = "M*M-ME") -> dict:
    """A NemotronH small enough to plan by hand: 2 KV heads x 8 dims, 4 mamba heads x 8 dims."""
    return {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "hybrid_override_pattern": pattern,
        "num_hidden_layers": len(pattern),
        "hidden_size": 32,
        "intermediate_size": 64,
        "moe_intermediate_size": 16,
        "moe_shared_expert_intermediate_size": 16,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_shared_experts": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "mamba_num_heads": 4,
        "mamba_head_dim": 8,
        "n_groups": 2,
        "ssm_state_size": 16,
        "conv_kernel": 4,
        "vocab_size": 256,
        "max_position_embeddings": 2048,
        "torch_dtype": "bfloat16",
    }


def tiny_map(pattern: str = "M*M-ME", pp: int = 1):
    from bringup.core.families import build_layer_map

    return build_layer_map(tiny_nemotron_config(pattern), name="tiny", pp=pp)


def nano_map(pp: int = 1):
    from bringup.core.sources.resolve import load_layer_map

    return load_layer_map(str(NANO), pp=pp)


def real_map(filename: str, pp: int = 1):
    """A real config's layer map; skips (with the reason) while its family is not built yet."""
    import json

    import pytest

    from bringup.core.families import supported_model_types
    from bringup.core.sources.resolve import load_layer_map

    text = (MODELS / filename).read_text()
    model_type = json.loads(text.replace("Infinity", "1e999")).get("model_type")
    if model_type not in supported_model_types():
        pytest.skip(f"layer-map family {model_type!r} not built yet")
    return load_layer_map(str(MODELS / filename), pp=pp)
