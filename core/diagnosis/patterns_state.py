"""Hybrid capacity, parallelism, and the mirror of the seed crash: a state pool asked for an attention
layer. SGLang's wording; vLLM's own classes of the same failures are in patterns_vllm.py."""

from __future__ import annotations

from .pattern import Pattern

STATE: tuple[Pattern, ...] = (
    Pattern(
        "LAYER_NOT_IN_STATE_POOL", "sglang", "error",
        r"^(?:\[[^\]]*\]\s*)?KeyError: (?P<layer>\d+)\s*$",
        "Layer {layer} is not in the mamba state pool",
        "Something asked SGLang's mamba state pool for layer {layer}, but that pool maps only the model's "
        "state (mamba / linear-attention) layers: the mirror of the PR #32227 crash, here a linear-attention or "
        "Mamba backend (or a PP stage's layer range) handed an attention layer's index to the state pool.",
        "Check which layers the state backend is built for: the model's layer-type list (hybrid_override_pattern, "
        "layer_types) must agree with the checkpoint, and with --pp-size each stage's pool holds only its own "
        "layers (upgrade sglang if the pool is built with global ids on a later stage).",
        source="sglang mem_cache/memory_pool.py MambaPool.get_mamba_params (self.mamba_map[layer_id]); "
               "HybridReqToTokenPool.mamba2_layer_cache",
        kind="layer", pool="state",
        near=r"mamba_map\[layer_id\]|get_mamba_params|mamba2_layer_cache|MambaPool",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "LAYER_NOT_IN_STATE_POOL", "sglang", "error",
        r"^\s*AssertionError\s*$",
        "A layer is not in the mamba state pool",
        "HybridReqToTokenPool asserts `layer_id in self.mamba_map`: a backend asked the state pool for a layer "
        "that keeps no state (an attention or MLP layer), or for a layer of another PP stage.",
        "Check the model's layer-type list against the checkpoint, and the PP split; the map shows the state layers.",
        source="sglang mem_cache/memory_pool.py HybridReqToTokenPool.mamba2_layer_cache / get_mamba_params",
        near=r"assert layer_id in self\.mamba_map",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "TP_NOT_DIVIDING_MAMBA_HEADS", "vllm", "error",
        r"Tensor parallel world size must divide (?P<what>num heads|hidden size)",
        "The tensor-parallel size does not divide the Mamba {what}",
        "Mamba2 shards its heads (and the intermediate size) across TP ranks; with this --tensor-parallel-size "
        "the {what} do not split evenly.",
        "Pick a TP size that divides the model's mamba_num_heads (bringup inspect shows it), or use pipeline "
        "parallelism for the rest.",
        source="vllm 0.33.0 model_executor/layers/mamba/mamba_mixer2.py:116-118, 315-317",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "TP_NOT_DIVIDING_MAMBA_GROUPS", "vllm", "error",
        r"If tensor parallel world size does not divide num_groups, then num_groups must equal 1",
        "The tensor-parallel size does not divide the Mamba groups",
        "Mamba2's B/C groups (n_groups) are sharded across TP ranks; they must divide evenly, or be a single group "
        "that every rank replicates.",
        "Pick a TP size that divides n_groups (bringup inspect shows it).",
        source="vllm 0.33.0 model_executor/layers/mamba/mamba_mixer2.py:320-323",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
    Pattern(
        "TP_NOT_DIVIDING_HEADS", "vllm", "error",
        r"Total number of attention heads \((?P<heads>\d+)\) must be divisible by tensor parallel size \((?P<tp>\d+)\)",
        "TP {tp} does not divide the {heads} attention heads",
        "Each TP rank takes an equal share of the attention heads; {heads} heads do not split over {tp} ranks.",
        "Use a --tensor-parallel-size that divides {heads}, and add pipeline parallelism for more devices.",
        source="vllm 0.33.0 config/model.py:1558-1564 verify_with_parallel_config",
        supersedes=("UNRECOGNIZED_ERROR",),
    ),
)
