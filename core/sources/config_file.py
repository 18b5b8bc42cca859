"""Reading a config.json as shipped: lenient about NVIDIA's bare Infinity/NaN, strict about shape."""

from __future__ import annotations

import json
from pathlib import Path

from bringup.core.errors import UserError

MAX_CONFIG_BYTES = 16 * 1024 * 1024  # real configs are a few KB; refuse to parse a checkpoint by mistake
# Real configs nest a few levels (a wrapper's text_config, rope_parameters per layer kind); the
# readers after this one walk the config recursively, so a deeper one would end in a RecursionError.
MAX_CONFIG_DEPTH = 32


def nesting_depth(data) -> tuple[int, str]:
    """How deep objects and lists nest in `data`, and the path to the deepest (walked without recursion)."""
    deepest, where = 0, ""
    stack = [(data, 0, "")]
    while stack:
        value, depth, path = stack.pop()
        if depth > deepest:
            deepest, where = depth, path
        if isinstance(value, dict):
            stack.extend((v, depth + 1, f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value))
    return deepest, where


def _shown_path(path: str) -> str:
    parts = path.split(".")
    return path if len(parts) <= 4 else f"{'.'.join(parts[:2])}... ({len(parts)} levels) ...{parts[-1]}"


def parse_config_text(text: str, where: str) -> dict:
    """Python's json accepts the bare `Infinity`, `-Infinity` and `NaN` tokens that strict parsers reject."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(
            f"{where} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg}); "
            "fix the file or download config.json again"
        ) from None
    except RecursionError:
        raise UserError(f"{where} nests too deeply to be a model config; point at the model's config.json") from None
    if not isinstance(data, dict):
        raise UserError(f"{where} holds a JSON {type(data).__name__}, not an object; point at the model's config.json")
    depth, path = nesting_depth(data)
    if depth > MAX_CONFIG_DEPTH:
        raise UserError(
            f"{where} nests objects {depth} deep ({_shown_path(path)}); a model config nests at most a few levels "
            f"(this reader takes {MAX_CONFIG_DEPTH}). Fix the nesting, e.g. keep one text_config, in config.json"
        )
    return data


def read_config_file(path: Path) -> dict:
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise UserError(f"{path} is {size // (1024 * 1024)} MiB, too large for a config.json; point at the model's config.json")
        raw = path.read_bytes()
    except UserError:
        raise
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}; check the path and its permissions") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text; point at the model's config.json") from None
    return parse_config_text(text, str(path))
