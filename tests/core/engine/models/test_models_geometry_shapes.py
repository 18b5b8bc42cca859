"""The map and the engine cannot disagree about a model's size: for every real config under
shared/models the engine runs and every tiny config the tests use, the engine model built on the
meta device (no memory) holds, layer by layer, exactly the parameters the layer map counts, and
each tensor of each part has the shape the map's typed geometry gives it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from bringup.core.engine.loader import decode_special_floats
from bringup.core.engine.models import decoder_config, model_class_for, supported_model_types
from bringup.core.families import build_layer_map
from bringup.kernels.dispatch import ops_for

from repo_paths import SHARED_MODELS
from tiny_family_configs import tiny_family_configs

transformers = pytest.importorskip("transformers")

# Tensors the engine holds as parameters that transformers (whose parameters the map counts) holds
# as buffers: the routers' selection bias.
_BUFFERS_IN_TRANSFORMERS = ("e_score_correction_bias",)


def _shared_configs() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(SHARED_MODELS.glob("*.json")):
        config = decode_special_floats(json.loads(path.read_text()))
        if config.get("model_type") in supported_model_types():
            out.append((path.stem, config))
    return out


CASES = _shared_configs() + tiny_family_configs()


def _build(config: dict):
    config = decoder_config(config)
    layer_map = build_layer_map(config)
    with torch.device("meta"):
        model = model_class_for(config)(config, ops_for("cpu"), layer_map)
    return layer_map, model


def _counted(module) -> int:
    return sum(p.numel() for n, p in module.named_parameters() if not n.endswith(_BUFFERS_IN_TRANSFORMERS))


# -- the shape each tensor must have, from the map's geometry ----------------------------------------


def _mixer_rules(layer, hidden: int) -> list[tuple[str, tuple]]:
    """(name pattern, shape) for the mixer's tensors of one layer, from its typed geometry."""
    rules: list[tuple[str, tuple]] = []
    a = layer.attention
    if a is not None and a.latent is None and not a.shared_block:  # (Zamba2's shared block lives outside the layer)
        d_in = a.in_dim or hidden
        rules += [(r"k_proj\.weight", (a.kv_width, d_in)), (r"(?<!_)v_proj\.weight", (a.kv_width, d_in)),
                  # Qwen3-Next's query projection also carries the output gate: twice as wide.
                  (r"q_proj\.weight", {(a.q_width, d_in), (2 * a.q_width, d_in)}),
                  (r"self_attn\.(o_proj|out_proj)\.weight", (hidden, a.q_width)), (r"sinks", (a.heads,))]
    if a is not None and a.latent is not None:
        lat = a.latent
        nope = a.head_dim - lat.qk_rope_head_dim
        rules += [(r"kv_a_proj_with_mqa\.weight", (lat.kv_lora_rank + lat.qk_rope_head_dim, hidden)),
                  (r"kv_b_proj\.weight", (a.heads * (nope + a.v_head_dim), lat.kv_lora_rank)),
                  (r"kv_a_layernorm\.weight", (lat.kv_lora_rank,)), (r"self_attn\.o_proj\.weight", (hidden, a.heads * a.v_head_dim)),
                  (r"q_b_proj\.weight", (a.heads * a.head_dim, lat.q_lora_rank)),
                  (r"self_attn\.q_proj\.weight", (a.heads * a.head_dim, hidden))]
    m = layer.mamba2
    if m is not None:
        rules += [(r"mamba\.in_proj\.weight|mixer\.in_proj\.weight", (m.intermediate + m.conv_dim + m.heads, hidden)),
                  (r"(mamba|mixer)\.conv1d\.weight", (m.conv_dim, 1, m.conv_kernel)),
                  (r"(mamba|mixer)\.(A_log|D|dt_bias)", (m.heads,)), (r"(mamba|mixer)\.norm\.weight", (m.intermediate,)),
                  (r"(mamba|mixer)\.out_proj\.weight", (hidden, m.intermediate))]
    v1 = layer.mamba
    if v1 is not None:
        rules += [(r"mamba\.in_proj\.weight", (2 * v1.inner, hidden)), (r"mamba\.conv1d\.weight", (v1.inner, 1, v1.conv_kernel)),
                  (r"mamba\.x_proj\.weight", (v1.dt_rank + 2 * v1.d_state, v1.inner)),
                  (r"mamba\.dt_proj\.weight", (v1.inner, v1.dt_rank)), (r"mamba\.A_log", (v1.inner, v1.d_state)),
                  (r"mamba\.out_proj\.weight", (hidden, v1.inner))]
    g = layer.gated_delta_net
    if g is not None:
        rules += [(r"conv1d\.weight", (g.conv_dim, 1, g.conv_kernel)), (r"linear_attn\.(A_log|dt_bias)", (g.value_heads,)),
                  (r"in_proj_qkvz\.weight", (2 * g.key_dim + 2 * g.value_dim, hidden)),
                  (r"in_proj_ba\.weight", (2 * g.value_heads, hidden)), (r"in_proj_qkv\.weight", (g.conv_dim, hidden)),
                  (r"in_proj_z\.weight", (g.value_dim, hidden)), (r"in_proj_[ab]\.weight", (g.value_heads, hidden)),
                  (r"linear_attn\.norm\.weight", (g.value_head_dim,)), (r"linear_attn\.out_proj\.weight", (hidden, g.value_dim))]
    k = layer.kda
    if k is not None:
        rules += [(r"self_attn\.[qkv]_proj\.weight", (k.width, hidden)), (r"[qkv]_conv1d\.weight", (k.width, 1, k.conv_kernel)),
                  (r"[fg]_a_proj\.weight", (k.head_dim, hidden)), (r"[fg]_b_proj\.weight", (k.width, k.head_dim)),
                  (r"self_attn\.dt_bias", (k.width,)), (r"self_attn\.A_log", (1, 1, k.heads, 1)),
                  (r"b_proj\.weight", (k.heads, hidden)), (r"o_norm\.weight", (k.head_dim,)),
                  (r"self_attn\.o_proj\.weight", (hidden, k.width))]
    lt = layer.lightning
    if lt is not None:
        width = lt.heads * lt.head_dim
        rules += [(r"qkv_proj\.weight", (3 * width, hidden)), (r"output_gate\.weight", (width, hidden)),
                  (r"self_attn\.norm\.weight", (width,)), (r"self_attn\.out_proj\.weight", (hidden, width))]
    sc = layer.short_conv
    if sc is not None:
        rules += [(r"conv\.in_proj\.weight", (3 * sc.channels, hidden)), (r"conv\.conv\.weight", (sc.channels, 1, sc.conv_kernel)),
                  (r"conv\.out_proj\.weight", (hidden, sc.channels))]
    return rules


def _ffn_rules(layer, hidden: int) -> list[tuple[str, object]]:
    """(name pattern, shape or a predicate on the shape) for the FFN's tensors."""
    rules: list[tuple[str, object]] = []
    moe, mlp = layer.moe, layer.mlp
    if moe is not None:
        E, I, S = moe.experts, moe.expert_intermediate, moe.shared_intermediate
        width = moe.latent or hidden
        # Stacked experts [E, ...] with the expert width (or gate and up fused, 2I) among their dims.
        rules += [(r"experts\.\w+_bias$", lambda s: s[0] == E and len(s) == 2),
                  (r"experts\.\w+$|block_sparse_moe\.(input|output)_linear$",
                   lambda s: s[0] == E and len(s) == 3 and (I in s[1:] or 2 * I in s[1:]) and
                   (width in s[1:] or 2 * width in s[1:])),
                  (r"(\.gate|router|router\.layer)\.weight$", (E, hidden))]
        if S:
            rules += [(r"shared_experts?\.(gate_proj|up_proj)\.weight|shared_mlp\.input_linear\.weight",
                       {(S, hidden), (2 * S, hidden)}),
                      (r"shared_experts?\.down_proj\.weight|shared_mlp\.output_linear\.weight", (hidden, S))]
        if moe.latent:
            rules += [(r"fc1_latent_proj\.weight", (moe.latent, hidden)), (r"fc2_latent_proj\.weight", (hidden, moe.latent))]
    elif mlp is not None:
        I = mlp.intermediate
        rules += [(r"(gate_proj|up_proj|w1|w3|gate_up_proj)\.weight|shared_mlp\.input_linear\.weight",
                   {(I, hidden), (2 * I, hidden)}),
                  (r"(down_proj|w2)\.weight|shared_mlp\.output_linear\.weight", (hidden, I))]
    return rules


def _check(rule, shape: tuple) -> bool:
    if callable(rule):
        return rule(shape)
    return shape in rule if isinstance(rule, set) else shape == rule


@pytest.mark.parametrize("name, config", CASES, ids=[c[0] for c in CASES])
def test_engine_tensors_have_the_maps_sizes(name, config):
    layer_map, model = _build(config)
    hidden = model.config.hidden_size
    assert len(model.decoder.layers) == layer_map.num_layers
    for layer, module in zip(layer_map.layers, model.decoder.layers):
        assert _counted(module) == layer.params, (
            f"{name} layer {layer.index} ({layer.mixer}, {layer.ffn}): the engine holds {_counted(module):,} "
            f"parameters, the map counts {layer.params:,}")
        ffn_prefix = f"{module.ffn_name}." if getattr(module, "ffn_name", None) else None
        mixer_rules, ffn_rules = _mixer_rules(layer, hidden), _ffn_rules(layer, hidden)
        checked = {"mixer": 0, "ffn": 0}
        for pname, param in module.named_parameters():
            in_ffn = ffn_prefix is not None and pname.startswith(ffn_prefix)
            for pattern, rule in (ffn_rules if in_ffn else mixer_rules):
                if re.search(pattern, pname):
                    assert _check(rule, tuple(param.shape)), (
                        f"{name} layer {layer.index}: {pname} is {list(param.shape)}, not what the map's geometry gives "
                        f"({rule if not callable(rule) else 'see _ffn_rules'})")
                    checked["ffn" if in_ffn else "mixer"] += 1
                    break
        # Every part the map describes had its tensors checked (no part passes by matching nothing).
        if mixer_rules and layer.mixer != "none" and not (layer.attention and layer.attention.shared_block
                                                            and layer.mamba2 is None):
            assert checked["mixer"], f"{name} layer {layer.index}: no mixer tensor matched the {layer.mixer} geometry"
        if ffn_rules and layer.ffn != "none" and not (layer.attention and layer.attention.shared_block):
            assert checked["ffn"], f"{name} layer {layer.index}: no FFN tensor matched the {layer.ffn} geometry"
    assert _counted(model) == layer_map.params_total, f"{name}: engine {_counted(model):,} vs map {layer_map.params_total:,}"


def test_a_size_the_map_and_engine_disagreed_on_is_now_read_once():
    """NemotronH without n_routed_experts: the map counted transformers' default (8) while the engine
    refused the config (it read cfg.n_routed_experts without a default); now both build 8 experts."""
    from tiny_family_configs import NEMOTRON_H

    config = transformers.NemotronHConfig(**NEMOTRON_H, hybrid_override_pattern="M*E").to_dict()
    config.pop("n_routed_experts")
    layer_map, model = _build(config)
    moe = model.decoder.layers[2].ffn_module
    assert layer_map.layers[2].moe.experts == 8 == moe.experts.up_proj.shape[0]
