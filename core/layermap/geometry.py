"""Per-layer cache bytes on one tensor-parallel rank, from the layer map's TP-1 element counts.

The layer map stores cache geometry in elements at TP 1 (`Layer.kv_elems_per_token`,
`conv_state_elems`, `ssm_state_elems`). Splitting them over TP follows SGLang:
- KV heads: `max(1, kv_heads // tp)` per rank, so heads are replicated once tp > kv_heads
  (Nemotron-3-Nano's 2 KV heads give 3,072 B/token at TP 2 *and* TP 4). MLA's latent cache is not split.
- Mamba2 state (`Mamba2StateShape.create`): groups are padded up to `tp` when `n_groups % tp != 0`,
  conv = `(intermediate + 2*groups*d_state)/tp x (kernel-1)`, SSM = `heads/tp x head_dim x d_state`.
Where the sizes needed for the exact rule are not known (the generic reader could not learn them),
the TP-1 count is divided by tp (rounded up).
"""

from __future__ import annotations

from math import ceil

from bringup.core.layermap.vocabulary import Layer


def kv_elems_per_token(layer: Layer, tp: int) -> int:
    """K+V elements one token takes in this layer on one TP rank."""
    total = layer.kv_elems_per_token
    if not layer.is_kv or total == 0 or tp == 1:
        return total if layer.is_kv else 0
    attn = layer.attention
    if attn is not None and attn.latent is not None and attn.latent.kv_lora_rank:
        return total  # the latent KV is replicated on every rank
    heads = attn.kv_heads if attn is not None else None
    if heads and total % heads == 0:
        return total // heads * max(1, heads // tp)
    return ceil(total / tp)


def state_elems_per_request(layer: Layer, tp: int) -> tuple[int, int]:
    """(conv, ssm) state elements one request holds in this layer on one TP rank."""
    if not layer.is_state:
        return 0, 0
    conv, ssm = layer.conv_state_elems, layer.ssm_state_elems
    if tp == 1:
        return conv, ssm
    m = layer.mamba2
    if layer.mixer in ("mamba2", "attention+mamba2") and m is not None:
        padded_groups = m.groups if m.groups % tp == 0 else tp  # SGLang adds (tp - groups) groups
        conv_dim = m.intermediate + 2 * padded_groups * m.d_state
        return ceil(conv_dim / tp) * (m.conv_kernel - 1), ceil(m.heads / tp) * m.head_dim * m.d_state
    return ceil(conv / tp), ceil(ssm / tp)


def kv_bytes_per_token(layers, tp: int, kv_bytes: int) -> int:
    return sum(kv_elems_per_token(l, tp) for l in layers) * kv_bytes


def state_bytes_per_request(layers, tp: int, conv_bytes: int, ssm_bytes: int) -> tuple[int, int]:
    """(conv bytes, ssm bytes) of one request's state over `layers` on one TP rank."""
    conv = ssm = 0
    for layer in layers:
        c, s = state_elems_per_request(layer, tp)
        conv += c
        ssm += s
    return conv * conv_bytes, ssm * ssm_bytes


def mixer_layers(layers) -> list[Layer]:
    """Layers that mix tokens at all (a NemotronH MoE-only block has mixer 'none')."""
    return [l for l in layers if l.mixer != "none"]


def attention_kv_elems(layers, tp: int) -> int | None:
    """K+V elements per token of one typical full-attention layer (the mean over the model's KV layers)."""
    kv = [kv_elems_per_token(l, tp) for l in layers if l.is_kv and l.kv_elems_per_token]
    return round(sum(kv) / len(kv)) if kv else None
