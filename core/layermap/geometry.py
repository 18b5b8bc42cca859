"""Per-layer cache bytes on one tensor-parallel rank, from the layer map's TP-1 element counts.

The layer map stores cache geometry in elements at TP 1 (`Layer.kv_elems_per_token`,
`conv_state_elems`, `ssm_state_elems`). Splitting them over TP follows SGLang:
- KV heads: `max(1, kv_heads // tp)` per rank, so heads are replicated once tp > kv_heads
  (Nemotron-3-Nano's 2 KV heads give 3,072 B/token at TP 2 *and* TP 4). MLA's latent cache is not split.
- Mamba2 state (`Mamba2StateShape.create`): groups are padded up to `tp` when `n_groups % tp != 0`,
  conv = `(intermediate + 2*groups*d_state)/tp x (kernel-1)`, SSM = `heads/tp x head_dim x d_state`.
Where the attrs needed for the exact rule are missing, the TP-1 count is divided by tp (rounded up).
"""

from __future__ import annotations

from math import ceil

from bringup.core.layermap.vocabulary import Layer

# attrs keys the families may use for the same fact (first present wins).
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "kv_heads")
_MLA = ("kv_lora_rank",)
_N_GROUPS = ("mamba_groups", "n_groups", "mamba_n_groups", "ngroups")
_D_STATE = ("ssm_state_size", "d_state", "state_size", "mamba_d_state")
_CONV_KERNEL = ("conv_kernel", "d_conv", "mamba_d_conv", "conv_kernel_size")
_SSM_HEADS = ("mamba_heads", "mamba_num_heads", "mamba_n_heads", "ssm_heads")
_SSM_HEAD_DIM = ("mamba_head_dim", "mamba_d_head", "ssm_head_dim")


def _attr(layer: Layer, names: tuple[str, ...]) -> int | None:
    for name in names:
        value = layer.attrs.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def kv_elems_per_token(layer: Layer, tp: int) -> int:
    """K+V elements one token takes in this layer on one TP rank."""
    total = layer.kv_elems_per_token
    if not layer.is_kv or total == 0 or tp == 1:
        return total if layer.is_kv else 0
    if _attr(layer, _MLA):
        return total  # the latent KV is replicated on every rank
    heads = _attr(layer, _KV_HEADS)
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
    groups, d_state, kernel = _attr(layer, _N_GROUPS), _attr(layer, _D_STATE), _attr(layer, _CONV_KERNEL)
    heads, head_dim = _attr(layer, _SSM_HEADS), _attr(layer, _SSM_HEAD_DIM)
    if layer.mixer in ("mamba2", "attention+mamba2") and None not in (groups, d_state, kernel, heads, head_dim):
        intermediate = heads * head_dim
        padded_groups = groups if groups % tp == 0 else tp  # SGLang adds (tp - groups) groups
        conv_dim = intermediate + 2 * padded_groups * d_state
        return ceil(conv_dim / tp) * (kernel - 1), ceil(heads / tp) * head_dim * d_state
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
