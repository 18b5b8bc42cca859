"""One line naming what an engine server really runs, from its /server_info: architecture,
parameter count, where the weights came from, dtype and device. Text from random weights (dummy
weights, the bundled miniature) is labelled as noise wherever this line is shown."""

from __future__ import annotations

MINIATURE_NAME = "nemotron-3-nano-pattern-tiny"  # core.engine.default_model.DEFAULT_CHECKPOINT_NAME (no torch import)


def weights_label(info: dict) -> str:
    if info.get("load_format") == "dummy":
        return "dummy weights (seeded random: text is noise)"
    if str(info.get("model") or "").startswith(MINIATURE_NAME):
        return "bundled miniature (random weights: text is noise)"
    return "checkpoint weights" if info.get("load_format") else ""


def is_random_weights(info: dict) -> bool:
    return "noise" in weights_label(info)


def running_label(info: dict) -> str:
    """e.g. "NemotronHForCausalLM · 31.58 B params · dummy weights (...) · bfloat16 · cuda (NVIDIA H200)"."""
    parts = []
    if info.get("architecture"):
        parts.append(str(info["architecture"]))
    params = info.get("params")
    if isinstance(params, (int, float)) and params > 0:
        parts.append(f"{params / 1e9:.2f} B params" if params >= 1e8 else f"{params / 1e6:.1f} M params")
    weights = weights_label(info)
    if weights:
        parts.append(weights)
    if info.get("dtype"):
        parts.append(str(info["dtype"]))
    device, name = info.get("device") or "", info.get("device_name") or ""
    if device:
        parts.append(f"{device} ({name})" if name and name != device else device)
    return " · ".join(parts)
