"""Layer indices a traceback names in its own words (`layer_id=5`, `model.layers.20.linear_attn`,
`layer 5`, `layer_idx: 5`, `get_value_buffer(0)`), so an exception no pattern knows still marks its layer on the map."""

from __future__ import annotations

import re

_MENTION = re.compile(
    r"\blayer_(?:id|idx|index)\s*[=:]\s*(?P<a>\d+)"
    r"|\blayers?\.(?P<b>\d+)\."
    r"|\blayers?\[(?P<c>\d+)\]"
    r"|\b[Ll]ayer (?P<d>\d+)\b"
    r"|\bget_(?:key|value|kv)_buffers?\((?P<e>\d+)\)"  # a KV pool asked for one layer (SGLang memory_pool.py)
)
_FRAME = re.compile(r'^\s*File "')


def layers_named(lines: list[str]) -> tuple[int, ...]:
    """The layer indices named in these lines (frames' file paths skipped), first mention first."""
    found: list[int] = []
    for line in lines:
        if _FRAME.match(line):
            continue
        for m in _MENTION.finditer(line):
            index = int(next(g for g in m.groups() if g is not None))
            if index not in found:
                found.append(index)
    return tuple(found)
