"""Mamba2 read from the Bamba-style `mamba_*` keys, which Bamba, Granite-4.0-H and Falcon-H1 share."""

from __future__ import annotations

from bringup.core.families import _blocks as b
from bringup.core.families._view import ConfigView


def bamba_style_mamba2(view: ConfigView, hidden: int, heads: int, head_dim: int, *, intermediate: int,
                       **extra) -> b.Part:
    """The shared keys here; each family passes what it reads differently (biases, gated norm)."""
    return b.mamba2(
        hidden, heads, head_dim,
        groups=view.int("mamba_n_groups", default=1),
        d_state=view.int("mamba_d_state", default=256),
        conv_kernel=view.int("mamba_d_conv", default=4),
        conv_bias=view.bool("mamba_conv_bias", default=True),
        intermediate=intermediate,
        chunk_size=view.int("mamba_chunk_size", default=256, minimum=0),
        keys=view.keys(heads="mamba_n_heads", head_dim="mamba_d_head", groups="mamba_n_groups", d_state="mamba_d_state",
                       conv_kernel="mamba_d_conv", chunk_size="mamba_chunk_size"),
        **extra,
    )
