"""Why a GGUF file cannot be read, in the file's own terms: walked only after the `gguf` reader
refused it, so the good path costs nothing.

The reader's own errors are numpy's ("cannot reshape array of size 21 into shape (320,68)"), and
every failure used to read as an incomplete download. This walk follows the header's layout (magic,
version, counts, key/value entries, tensor infos; the GGUF spec in ggml's docs/gguf.md) with every
length checked against what the file holds, and says which entry is broken, or, when the header is
whole, whether the tensor data it declares reaches past the end of the file: only then is the
download to blame.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
# GGUF value types (gguf.constants.GGUFValueType): fixed-size scalars by struct code.
_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_MAX_DIMS = 8
PLAUSIBLE_COUNT = 1 << 20  # real files hold thousands of tensors and a few dozen metadata entries
PLAUSIBLE_LENGTH = 1 << 24  # a real string or array (a 256k-token vocabulary) stays far below this


class Damaged(Exception):
    """The header is broken at a place the message names."""


@dataclass
class HeaderWalk:
    size: int  # bytes in the file
    needed: int  # bytes the header says the file holds (its end of tensor data)
    tensors: int


def why_unreadable(path: Path) -> str:
    """A sentence saying what is wrong with a GGUF file the reader refused, and what to do."""
    try:
        data = path.read_bytes() if path.stat().st_size <= 64 << 20 else _head(path)
        size = path.stat().st_size
    except OSError as err:
        return f"it cannot be read ({err.strerror}); check the path and its permissions"
    if size < 4 or data[:4] != GGUF_MAGIC:
        start = data[:16]
        hint = " (it looks like a web page: the download saved an error page)" if start.lstrip().startswith(b"<") else ""
        return f"it does not start with the GGUF magic bytes (it starts with {start!r}){hint}; it is not a GGUF file"
    try:
        walk = walk_header(data, size)
    except Damaged as err:
        if len(data) < size:  # only the head was read: a header past it is not judged here
            return f"its header could not be read ({err}); the file is damaged: fetch or convert it again"
        if _ran_out(err):
            return f"it ends inside its own header ({err}) after {size} bytes: the download is incomplete, fetch it again"
        return f"its header is damaged ({err}); the file was not written by a working converter: fetch or convert it again"
    if walk.needed > size:
        return (f"its header declares {walk.tensors} tensors ending at byte {walk.needed}, but the file has only "
                f"{size} bytes ({100 * size / walk.needed:.0f}%): the download is incomplete, fetch it again")
    return "its header is whole but a tensor's data does not fit its declared type and shape; the file is damaged"


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(64 << 20)  # headers hold the tokenizer: tens of MB at most


def _ran_out(err: Damaged) -> bool:
    return str(err).startswith("the file ends at byte")


def walk_header(data: bytes, size: int) -> HeaderWalk:
    """Walk the header of `data` (the whole file or its head; `size` is the file's length)."""
    cur = _Cursor(data)
    cur.take(4, "the magic")
    version = cur.unpack("I", "the version")
    if version not in SUPPORTED_VERSIONS:
        raise Damaged(f"version {version}; readers know versions {', '.join(map(str, SUPPORTED_VERSIONS))}")
    tensor_count = cur.unpack("Q", "the tensor count")
    kv_count = cur.unpack("Q", "the metadata count")
    if tensor_count > PLAUSIBLE_COUNT or kv_count > PLAUSIBLE_COUNT:
        raise Damaged(f"it claims {tensor_count} tensors and {kv_count} metadata entries")
    alignment = DEFAULT_ALIGNMENT
    for i in range(kv_count):
        key = cur.string(f"the key of metadata entry {i}")
        kind = cur.unpack("I", f"the type of {key!r}")
        value = cur.value(kind, key)
        if key == "general.alignment":
            if kind != 4 or not value or value & (value - 1):
                raise Damaged(f"general.alignment is {value!r}; it must be a power of two stored as uint32")
            alignment = value
    infos = []
    for i in range(tensor_count):
        name = cur.string(f"the name of tensor {i}")
        dims = cur.unpack("I", f"the dimension count of {name!r}")
        if not 1 <= dims <= _MAX_DIMS:
            raise Damaged(f"tensor {name!r} has {dims} dimensions")
        shape = [cur.unpack("Q", f"a dimension of {name!r}") for _ in range(dims)]
        kind = cur.unpack("I", f"the type of tensor {name!r}")
        offset = cur.unpack("Q", f"the offset of tensor {name!r}")
        infos.append((name, shape, kind, offset))
    start = -(-cur.pos // alignment) * alignment
    needed = start
    for name, shape, kind, offset in infos:
        needed = max(needed, start + offset + _tensor_bytes(name, shape, kind))
    return HeaderWalk(size, needed, tensor_count)


def _tensor_bytes(name: str, shape: list[int], kind: int) -> int:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (ValueError, KeyError):
        raise Damaged(f"tensor {name!r} has tensor type {kind}, which no GGUF reader knows") from None
    count = 1
    for d in shape:
        count *= d
    if shape[0] % block:
        raise Damaged(f"tensor {name!r} has rows of {shape[0]} values, not a whole number of "
                      f"{GGMLQuantizationType(kind).name} blocks of {block}")
    return count // block * block_bytes


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise Damaged(f"the file ends at byte {len(self.data)} inside {what}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, code: str, what: str):
        return struct.unpack("<" + code, self.take(struct.calcsize(code), what))[0]

    def string(self, what: str) -> str:
        n = self.unpack("Q", what)
        self._fits(n, what, "bytes")
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise Damaged(f"{what} (at byte {self.pos - n}) is not UTF-8 text") from None

    def _fits(self, n: int, what: str, unit: str) -> None:
        """A length past the end: a plausible one means the file was cut there, an absurd one a damaged length."""
        if n > len(self.data) - self.pos:
            if n <= PLAUSIBLE_LENGTH:
                raise Damaged(f"the file ends at byte {len(self.data)} inside {what}")
            raise Damaged(f"{what} claims {n} {unit}; the file ends at byte {len(self.data)}")

    def value(self, kind: int, key: str):
        if kind in _SCALAR:
            return self.unpack(_SCALAR[kind], f"the value of {key!r}")
        if kind == _STRING:
            return self.string(f"the value of {key!r}")
        if kind == _ARRAY:
            item = self.unpack("I", f"the item type of {key!r}")
            n = self.unpack("Q", f"the length of {key!r}")
            self._fits(n, repr(key), "items")
            if item in _SCALAR:  # skip fixed-size items in one step
                self.take(n * struct.calcsize(_SCALAR[item]), f"the items of {key!r}")
            else:
                for _ in range(n):
                    self.value(item, key)
            return None
        raise Damaged(f"metadata {key!r} has value type {kind}, which no GGUF reader knows")
