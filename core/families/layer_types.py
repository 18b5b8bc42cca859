"""Any config with a `layer_types` list in a known vocabulary, whatever its model_type.

New architectures increasingly spell their schedule as `layer_types`; mapping it lets a brand-new
model be inspected before a family module exists. Parameters are counted for what the generic
fields describe (attention, dense MLP, embeddings) and flagged as approximate.
"""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._view import ConfigView

MODEL_TYPES: tuple[str, ...] = ()

MIXER_NAMES = {
    "full_attention": "attention",
    "attention": "attention",
    "global_attention": "attention",
    "sliding_attention": "sliding_attention",
    "sliding_window_attention": "sliding_attention",
    "chunked_attention": "sliding_attention",
    "linear_attention": "gated_delta_net",
    "gated_deltanet": "gated_delta_net",
    "gated_delta_net": "gated_delta_net",
    "mamba": "mamba2",
    "mamba2": "mamba2",
    "conv": "short_conv",
    "short_conv": "short_conv",
    "kda": "kimi_delta_attention",
    "kimi_delta_attention": "kimi_delta_attention",
    "lightning_attention": "lightning_attention",
}
HYBRID_OF_MIXER = {
    "mamba2": "mamba2",
    "mamba": "mamba2",  # as the Jamba family module says
    "attention+mamba2": "mamba2",  # Falcon-H1
    "short_conv": "mamba2",  # SGLang routes short-conv models through its mamba2 config path
    "gated_delta_net": "gdn",
    "kimi_delta_attention": "kimi_linear",
    "lightning_attention": "linear_attn",
}


def applies(cfg: dict) -> bool:
    types = cfg.get("layer_types")
    return (
        isinstance(types, list)
        and bool(types)
        and all(isinstance(t, str) and t.lower() in MIXER_NAMES for t in types)
    )


def mixers(view: ConfigView, key: str = "layer_types", names: dict = MIXER_NAMES) -> list[str]:
    types = view.list(key, item=str)
    if not types:
        raise view.bad(key, types, "a non-empty list of layer types")
    out = []
    for t in types:
        if t.lower() not in names:
            raise view.bad(key, t, "layer types " + " | ".join(sorted(names)))
        out.append(names[t.lower()])
    return out


def hybrid_family(mixer_list: list[str]) -> str | None:
    for m in mixer_list:
        if m in HYBRID_OF_MIXER:
            return HYBRID_OF_MIXER[m]
    return None


def build(view: ConfigView) -> FamilyResult:
    kinds = mixers(view)
    h = view.int("hidden_size")
    heads = view.int("num_attention_heads", default=max(1, h // 128))
    kv_heads = view.int("num_key_value_heads", default=heads)
    head_dim = view.int("head_dim", default=max(1, h // heads))
    window = view.int("sliding_window", default=0, minimum=0, maximum=1 << 40)
    inter = view.int("intermediate_size", default=0, minimum=0)
    layers, skipped = [], set()
    for m in kinds:
        part = b.norm(h) + b.norm(h)
        if m in ("attention", "sliding_attention"):
            part = part + b.attention(h, heads, kv_heads, head_dim, window=window if m == "sliding_attention" else None)
        else:
            skipped.add(m)
        if inter:
            part = part + b.mlp(h, inter)
        layers.append(LayerSpec(m, "mlp" if inter else "none", part))
    vocab = view.int("vocab_size", default=0, minimum=0)
    tied = view.bool("tie_word_embeddings", default=True)
    notes = [f"model_type {view.data.get('model_type')!r} has no family module; mapped from its layer_types list"]
    notes.append("parameter count is approximate: only attention, dense MLP, norms and embeddings are counted")
    if skipped:
        notes.append(f"parameters of {', '.join(sorted(skipped))} layers are not counted")
    return FamilyResult(
        layers=layers,
        hybrid_family=hybrid_family(kinds),
        outside=b.Part(params=vocab * h * (1 if tied else 2) + h),
        notes=notes,
        provenance={"path": "layer_types", "reader": "core/families/layer_types.py (the config's layer_types list only)"},
    )
