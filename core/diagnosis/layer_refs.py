"""Every way a log names a layer, read into one shape.

Engines spell a layer in many ways: `layer_id=5`, `layer 5`, `layer_idx: 5`, a module path
(`model.layers.20.linear_attn`, `language_model.model.layers.30.self_attn.attn`, `backbone.layers.1.mixer`,
`model.layers.43.mtp_block...`, `mtp.layers.0`), llama.cpp's `blk.40.ssm_conv1d.weight` and `il = 3`,
a list of valid ids (`dict_keys([5, 12, ...])`), and pool indices (`get_value_buffer(0)`). Each becomes
a LayerRef: the number, the scheme, the module named after it, and the line.

Numbers are read as text first: an id of thousands of digits is reported as absurd, never parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_DIGITS = 7  # a layer id longer than this is not a layer id

_PATH = re.compile(
    r"(?P<prefix>(?:[A-Za-z_][\w]*\.)*?)(?P<kind>layers|blk|h|mtp_layers|decoder\.layers)\.(?P<n>\d+)"
    r"(?P<rest>(?:\.[A-Za-z_][\w]*)*)"
)
_SIMPLE = (
    ("layer_id", re.compile(r"\blayer_(?:id|idx|index|no|num)\s*[=:]\s*(?P<n>\d+)")),
    ("il", re.compile(r"\bil\s*=\s*(?P<n>\d+)")),
    ("layer", re.compile(r"\b[Ll]ayer\s+#?(?P<n>\d+)\b")),
    ("layer[]", re.compile(r"\blayers?\[(?P<n>\d+)\]")),
    ("pool_index", re.compile(r"\bget_(?:key|value|kv)_buffers?\((?P<n>\d+)\)")),
)
_LIST = re.compile(r"dict_keys\(\[(?P<ids>[\d,\s]*)\]\)|(?:layers?|ids)\s*(?:are|=|:)?\s*\[(?P<ids2>\d+(?:\s*,\s*\d+)+)\]")
_FRAME = re.compile(r'^\s*File "|^\s*\[\d+\]\s*File|^\s*frame #\d+:')


@dataclass(frozen=True)
class LayerRef:
    layer: int | None  # None when the digits are absurd
    scheme: str  # module_path | blk | layer_id | il | layer | layer[] | pool_index | valid_list
    line: int  # 1-based
    text: str  # what was read ("language_model.model.layers.20.linear_attn")
    prefix: str = ""  # "language_model.model." (module paths only)
    module: str = ""  # what follows the index: "linear_attn", "self_attn.attn", "ssm_conv1d.weight"
    digits: str = ""  # the id as written

    @property
    def absurd(self) -> bool:
        return self.layer is None

    @property
    def mtp(self) -> bool:
        """The path names a multi-token-prediction (draft) block itself."""
        low = (self.prefix + self.module).lower()
        return "mtp" in low or "nextn" in low or "eagle" in low or "draft" in low


def _number(digits: str) -> int | None:
    return int(digits) if len(digits) <= MAX_DIGITS else None


def refs_in_line(line: str, line_no: int) -> list[LayerRef]:
    """The layer references in one log line (frames' own file paths are not references)."""
    if _FRAME.match(line) or ("layer" not in line and "blk." not in line and "il" not in line
                              and "h." not in line and "buffer(" not in line and "dict_keys" not in line):
        return []
    found: list[LayerRef] = []
    spans: list[tuple[int, int]] = []
    for m in _PATH.finditer(line):
        kind = m["kind"]
        if kind == "h" and not m["prefix"]:  # "h.3" alone is too common in text
            continue
        scheme = "blk" if kind == "blk" else "module_path"
        found.append(LayerRef(_number(m["n"]), scheme, line_no, m.group(0), m["prefix"], m["rest"].lstrip("."), m["n"]))
        spans.append(m.span())
    for scheme, regex in _SIMPLE:
        for m in regex.finditer(line):
            if any(a <= m.start() < b for a, b in spans):
                continue
            found.append(LayerRef(_number(m["n"]), scheme, line_no, m.group(0), digits=m["n"]))
    for m in _LIST.finditer(line):
        for digits in re.findall(r"\d+", m["ids"] if m["ids"] is not None else m["ids2"]):
            found.append(LayerRef(_number(digits), "valid_list", line_no, m.group(0)[:80], digits=digits))
    return found


def layer_refs(lines: list[str], start: int = 0, stop: int | None = None) -> list[LayerRef]:
    """References in lines[start:stop], in order (line numbers 1-based into `lines`)."""
    out: list[LayerRef] = []
    stop = len(lines) if stop is None else stop
    for i in range(start, stop):
        out.extend(refs_in_line(lines[i], i + 1))
    return out


def distinct_layers(refs: list[LayerRef]) -> tuple[int, ...]:
    """The layer ids named, first mention first, absurd ones left out."""
    seen: dict[int, None] = {}
    for r in refs:
        if r.layer is not None:
            seen.setdefault(r.layer)
    return tuple(seen)
