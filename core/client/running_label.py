"""One line naming what an engine server really runs, from its /server_info: architecture,
parameter count, where the weights came from, dtype and device. Text from random weights (dummy
weights, the bundled miniature) is labelled as noise wherever this line is shown."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
    """e.g. "NemotronHForCausalLM · 31.58 B params · dummy weights (...) · fp8_e4m3, fp32 per 128x128 block
    (W8A16) · bfloat16 · cuda (NVIDIA H200)": the weight scheme where the weights are quantized."""
    parts = []
    if info.get("architecture"):
        parts.append(str(info["architecture"]))
    params = info.get("params")
    if isinstance(params, (int, float)) and params > 0:
        parts.append(f"{params / 1e9:.2f} B params" if params >= 1e8 else f"{params / 1e6:.1f} M params")
    weights = weights_label(info)
    if weights:
        parts.append(weights)
    quant = _quantization(info)
    if quant:
        parts.append(quant)
    if info.get("dtype") and not quant.startswith("dequantised"):
        parts.append(str(info["dtype"]))
    device, name = info.get("device") or "", info.get("device_name") or ""
    if device:
        parts.append(f"{device} ({name})" if name and name != device else device)
    return " · ".join(parts)


def audience_device(info: dict) -> str:
    """The device as people in the room would name it: "NVIDIA H200", "Intel XPU (xpu:0)", "the CPU (x86_64)"."""
    device, name = str(info.get("device") or ""), str(info.get("device_name") or "")
    kind = device.split(":")[0]
    if kind == "cpu":
        return f"the CPU ({name})" if name and name != "cpu" else "the CPU"
    if name and name != device:
        return name
    return {"xpu": "Intel XPU", "cuda": "NVIDIA GPU", "mps": "Apple GPU"}.get(kind, device or "an unnamed device") + (
        f" ({device})" if device and device != kind else "")


def _quantization(info: dict) -> str:
    """The weight scheme really running: ours says it in `weights` (core/engine/quantized.py:
    RunningScheme), SGLang in `quantization`. "" for plain weights in the model dtype."""
    ours = info.get("weights")
    if isinstance(ours, dict):
        if ours.get("dequantised_from"):
            return f"dequantised to {info.get('dtype') or ours.get('scheme')} from {ours['dequantised_from']}"
        if not ours.get("method"):
            return ""
        # A GGUF model's blocks on the CPU: bf16 products inside the float32 activations the dtype names.
        products = f", {ours['products_dtype']} products" if ours.get("products_dtype") else ""
        return f"{ours.get('scheme') or ''}{products}"
    q = info.get("quantization")
    if isinstance(q, dict):
        return str(q.get("scheme") or q.get("method") or "")
    return str(q or "")


@dataclass(frozen=True)
class ServedModel:
    """What one engine server really runs, from its /server_info: the model every part of the window
    (header, map badge, chat, demo, graphs, report) names while it runs."""

    url: str
    name: str  # the served model name (what the OpenAI `model` field must say)
    architecture: str = ""
    model_type: str = ""
    params: int | None = None
    weights: str = ""  # in words: "checkpoint weights", "dummy weights (seeded random: text is noise)"...
    random_weights: bool = False
    dtype: str = ""
    device: str = ""  # "cuda:0"
    device_name: str = ""  # as the audience would name it
    quantization: str = ""
    model_path: str = ""  # the folder or GGUF file it was loaded from (what the map can load)
    kv_layers: tuple[int, ...] | None = None  # None: the server does not say
    state_layers: tuple[int, ...] | None = None
    label: str = ""  # running_label(info)

    @classmethod
    def from_info(cls, info: dict, url: str = "") -> "ServedModel":
        def layers(key):
            value = info.get(key)
            return tuple(value) if isinstance(value, list) else None

        params = info.get("params")
        return cls(
            # The name requests must use: ours says model_name, SGLang served_model_name; "model" is the checkpoint's.
            url=url, name=str(info.get("model_name") or info.get("served_model_name") or info.get("model")
                              or info.get("model_path") or "unknown"),
            architecture=str(info.get("architecture") or ""), model_type=str(info.get("model_type") or ""),
            params=int(params) if isinstance(params, (int, float)) and params > 0 else None,
            weights=weights_label(info) or str(info.get("weights_source") or ""), random_weights=is_random_weights(info),
            dtype=str(info.get("dtype") or ""), device=str(info.get("device") or ""),
            device_name=audience_device(info) if info.get("device") or info.get("device_name") else "",
            quantization=_quantization(info), model_path=str(info.get("model_path") or ""),
            kv_layers=layers("kv_layers"), state_layers=layers("state_layers"), label=running_label(info))

    @property
    def map_source(self) -> str:
        """What the model bar loads to show this model's map."""
        if self.name.startswith(MINIATURE_NAME) or self.name == "default":
            return "default"
        return self.model_path or self.name

    def is_map_of(self, layer_map) -> bool:
        """Whether the map on screen is this model's (same file or folder, or the same architecture
        and size: a config and the checkpoint it describes)."""
        if layer_map is None:
            return False
        source = str(getattr(layer_map, "source", "") or "")
        if self.name.startswith(MINIATURE_NAME) or self.name == "default":
            return source == "default" or str(getattr(layer_map, "name", "")).startswith(MINIATURE_NAME)
        if self.model_path and source:
            mine, theirs = Path(self.model_path).expanduser(), Path(source).expanduser()
            theirs = theirs.parent if theirs.name == "config.json" else theirs
            try:
                if mine.resolve() == theirs.resolve():
                    return True
            except OSError:
                pass
        total = getattr(layer_map, "params_total", 0) or 0
        return bool(self.architecture and self.architecture == getattr(layer_map, "architecture", None)
                    and self.params and total and abs(total - self.params) <= 0.02 * max(total, self.params))

    def facts(self) -> dict:
        """Rows for the report's served-model section."""
        rows = {"served as": self.name, "architecture": self.architecture, "model type": self.model_type,
                "parameters": f"{self.params:,}" if self.params else "", "weights": self.weights,
                "quantization": self.quantization or "none", "dtype": self.dtype,
                "device": (f"{self.device_name} ({self.device})" if self.device_name and self.device
                           and self.device not in self.device_name else self.device_name or self.device),
                "loaded from": self.model_path, "server": self.url}
        return {k: v for k, v in rows.items() if v}
