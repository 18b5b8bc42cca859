"""Typed, forgiving reads of a raw config dict.

Real config files are messy and user-supplied: a field can be missing, null, a string where a
number belongs, or a float like 128.0. Every read goes through ConfigView so that a bad value
becomes a UserError naming the field and what was expected, never a TypeError deep in a formula.
"""

from __future__ import annotations

import math

from bringup.core.errors import UserError

_MISSING = object()
# Far above any real model; guards against corrupted values that would make us loop for hours.
MAX_LAYERS = 4096
MAX_DIM = 1 << 24


class ConfigView:
    def __init__(self, data: dict, label: str):
        if not isinstance(data, dict):
            raise UserError(f"{label}: the config is a {type(data).__name__}, not a JSON object; point at a model's config.json")
        self.data = data
        self.label = label  # what to call the model in messages

    # -- presence -----------------------------------------------------------------------------
    def has(self, *keys: str) -> bool:
        return any(self.data.get(k) is not None for k in keys)

    def _raw(self, keys: tuple[str, ...]):
        for k in keys:
            if self.data.get(k) is not None:
                return k, self.data[k]
        return keys[0], _MISSING

    def key(self, *keys: str) -> str:
        """The spelling of a field this config uses (the first of `keys` present, else the first)."""
        return self._raw(keys)[0]

    def keys(self, **aliases: str | tuple[str, ...]) -> dict[str, str]:
        """{size name: config field} for a geometry's `keys`, each alias list resolved to the spelling
        this config uses, so a message about the size names the field to fix."""
        return {name: self.key(*((a,) if isinstance(a, str) else a)) for name, a in aliases.items()}

    def bad(self, key: str, value, expected: str) -> UserError:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return UserError(
            f"{self.label}: config field '{key}' is {shown}; expected {expected}. "
            "Fix the field in config.json or pick another model"
        )

    def missing(self, key: str, expected: str) -> UserError:
        return UserError(
            f"{self.label}: config field '{key}' is missing; expected {expected}. "
            "Add it to config.json or pick another model"
        )

    # -- scalars ------------------------------------------------------------------------------
    def int(self, *keys: str, default=_MISSING, minimum: int = 1, maximum: int = MAX_DIM) -> int:
        key, value = self._raw(keys)
        if value is _MISSING:
            if default is _MISSING:
                raise self.missing(key, f"an integer >= {minimum}")
            return default
        what = f"an integer between {minimum} and {maximum}"
        if isinstance(value, bool):
            raise self.bad(key, value, what)
        if isinstance(value, float):
            if not math.isfinite(value) or value != int(value):
                raise self.bad(key, value, what)
            value = int(value)
        if not isinstance(value, int) or not minimum <= value <= maximum:
            raise self.bad(key, value, what)
        return value

    def float(self, *keys: str, default=_MISSING) -> float:
        key, value = self._raw(keys)
        if value is _MISSING:
            if default is _MISSING:
                raise self.missing(key, "a number")
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.bad(key, value, "a number")
        return float(value)

    def bool(self, *keys: str, default=_MISSING) -> bool:
        key, value = self._raw(keys)
        if value is _MISSING:
            if default is _MISSING:
                raise self.missing(key, "true or false")
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise self.bad(key, value, "true or false")

    def str(self, *keys: str, default=_MISSING) -> str:
        key, value = self._raw(keys)
        if value is _MISSING:
            if default is _MISSING:
                raise self.missing(key, "a string")
            return default
        if not isinstance(value, str):
            raise self.bad(key, value, "a string")
        return value

    # -- containers ---------------------------------------------------------------------------
    def list(self, *keys: str, item: type, default=_MISSING, max_len: int = MAX_LAYERS) -> list:
        key, value = self._raw(keys)
        if value is _MISSING:
            if default is _MISSING:
                raise self.missing(key, f"a list of {item.__name__}")
            return default
        what = f"a list of at most {max_len} {item.__name__} values"
        if not isinstance(value, list) or len(value) > max_len:
            raise self.bad(key, value, what)
        out = []
        for v in value:
            if item is int and isinstance(v, float) and math.isfinite(v) and v == int(v):
                v = int(v)
            if isinstance(v, bool) or not isinstance(v, item):
                raise self.bad(key, value, what)
            out.append(v)
        return out

    def dict(self, *keys: str, default=_MISSING) -> dict:
        key, value = self._raw(keys)
        if value is _MISSING:
            if default is _MISSING:
                raise self.missing(key, "an object")
            return default
        if not isinstance(value, dict):
            raise self.bad(key, value, "an object")
        return value

    def sub(self, key: str) -> "ConfigView":
        """A view of a nested object (e.g. Kimi's linear_attn_config), labelled with its path."""
        return ConfigView(self.dict(key), f"{self.label} ({key})")

    def num_layers(self, *keys: str) -> int:
        return self.int(*(keys or ("num_hidden_layers", "n_layer", "n_layers", "num_layers")), maximum=MAX_LAYERS)

    def per_layer(self, key: str, num_layers: int, names: dict[str, str]) -> list[str]:
        """A list of one type name per layer (e.g. `layer_types`), each translated through `names`."""
        types = self.list(key, item=str)
        if len(types) != num_layers or any(t not in names for t in types):
            raise self.bad(key, types, f"{num_layers} entries of {' | '.join(names)}")
        return [names[t] for t in types]

    def layer_ids(self, key: str, num_layers: int, *, one_based: bool = False, default=_MISSING) -> list[int]:
        """A list of layer indices, checked against the layer count (converted to 0-based)."""
        ids = self.list(key, item=int, default=default)
        shift = 1 if one_based else 0
        out = []
        for i in ids:
            j = i - shift
            if not 0 <= j < num_layers:
                base = "1-based" if one_based else "0-based"
                raise self.bad(key, ids, f"{base} layer ids within the model's {num_layers} layers")
            out.append(j)
        return out
