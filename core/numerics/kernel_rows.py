"""How one check-kernels row is named for people: the op, the phase it was called in, its variant.

Plain Python (the GUI and the report use it without importing torch)."""

from __future__ import annotations


def row_label(row: dict) -> str:
    """e.g. "moe_experts_shared_unsummed (decode)", "paged_attention_prefill (prefill) [sliding_window=8 sinks]"."""
    label = str(row.get("name"))
    if row.get("phase"):
        label += f" ({row['phase']})"
    if row.get("variant"):
        label += f" [{row['variant']}]"
    return label


def split_key(key: str) -> tuple[str, str, str]:
    """(op, phase, variant) of a call's key, `op@phase` or `op@phase:variant` (kernel_calls.KernelCall.key)."""
    op, _, rest = key.partition("@")
    phase, _, variant = rest.partition(":")
    return op, phase, variant
