"""Data types the planner sizes things in: names people type, and their width in bytes."""

from __future__ import annotations

from bringup.core.errors import UserError

# Canonical name -> bytes per element. fp8 KV caches are stored as one byte (SGLang keeps them as uint8).
DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "int8": 1,
}

_ALIASES = {
    "fp32": "float32", "f32": "float32", "float": "float32",
    "bf16": "bfloat16",
    "fp16": "float16", "f16": "float16", "half": "float16",
    "fp8": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2",
}


def canonical_dtype(name: str, *, what: str = "dtype") -> str:
    """'bf16', 'torch.bfloat16', 'BFloat16' -> 'bfloat16'; anything unknown is a UserError."""
    key = str(name).strip().lower().removeprefix("torch.")
    key = _ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise UserError(f"unknown {what} {name!r}; choose one of: {', '.join(DTYPE_BYTES)} (or bf16, fp16, fp32, fp8)")
    return key


def dtype_bytes(name: str) -> int:
    return DTYPE_BYTES[canonical_dtype(name)]


def model_dtype(config: dict, default: str = "bfloat16") -> str:
    """The checkpoint's own dtype from its config (`torch_dtype`, or `dtype` in transformers 5)."""
    for cfg in (config, config.get("text_config") or {}):
        for key in ("torch_dtype", "dtype"):
            value = cfg.get(key)
            if isinstance(value, str):
                try:
                    return canonical_dtype(value)
                except UserError:
                    pass
    return default
