"""Reading a log file within bounds: any size, any encoding, binary refused with a reason.

A crash log can be 100 MB of start-up chatter, a UTF-16 file saved by a Windows console, or not
text at all (/dev/zero, a core dump). The reader streams it, keeps the head (the launch command,
the engine's version and settings) and the tail (the failure is at the end), and says how much of
the middle it skipped; it never holds more than the cap in memory.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAX_BYTES = 8 * 1024 * 1024  # the most of a log that is read (head and tail); the rest is skipped with a note
HEAD_SHARE = 0.25  # of the cap kept from the start, the rest from the end
SNIFF = 64 * 1024  # bytes looked at to tell the encoding and binary data
CHUNK = 1024 * 1024


@dataclass(frozen=True)
class LogText:
    text: str
    encoding: str  # utf-8, utf-8-sig, utf-16-le, utf-16-be
    size: int  # bytes of the source (read so far, for a stream)
    skipped: int = 0  # bytes of the middle not read
    skipped_at_line: int | None = None  # the text line where the skip note stands

    @property
    def note(self) -> str:
        if not self.skipped:
            return ""
        return (f"{self.skipped:,} bytes of the middle of this {self.size:,}-byte log were skipped (the first and "
                f"last parts were read; the failure is almost always at the end).")


class NotText(ValueError):
    """The data is not a text log; the message says what it looks like."""


def sniff_encoding(head: bytes) -> str:
    """The encoding of a log from its first bytes: a BOM, or NULs every other byte (UTF-16 without a BOM)."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith(codecs.BOM_UTF16_LE):
        return "utf-16-le"
    if head.startswith(codecs.BOM_UTF16_BE):
        return "utf-16-be"
    sample = head[:4096]
    if len(sample) >= 4:
        even, odd = sample[0::2], sample[1::2]
        if odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.05 * len(even):
            return "utf-16-le"
        if even.count(0) > 0.4 * len(even) and odd.count(0) < 0.05 * len(odd):
            return "utf-16-be"
    return "utf-8"


def _refuse_binary(head: bytes, encoding: str, name: str) -> None:
    if encoding.startswith("utf-16") or not head:
        return
    sample = head[:SNIFF]
    nul = sample.count(0)
    control = sum(1 for b in sample if b < 9 or 13 < b < 32) - nul
    if nul > 0.01 * len(sample) or control > 0.10 * len(sample):
        what = "all zero bytes" if nul == len(sample) else f"{nul:,} NUL and {control:,} control bytes in the first {len(sample):,}"
        raise NotText(f"{name} is not a text log ({what}); give the engine's console output or log file")


def _bom_len(encoding: str) -> int:
    return 3 if encoding == "utf-8-sig" else 0


def _decode(data: bytes, encoding: str) -> str:
    if encoding.startswith("utf-16") and len(data) % 2:
        data = data[:-1]
    return data.decode(encoding, errors="replace")


def read_stream(stream: BinaryIO, name: str = "the log", cap: int = MAX_BYTES) -> LogText:
    """Read a binary stream (stdin, a pipe, a file): head and tail within `cap` bytes, decoded."""
    head = stream.read(min(cap, SNIFF))
    encoding = sniff_encoding(head)
    _refuse_binary(head, encoding, name)
    head_cap = int(cap * HEAD_SHARE)
    start = bytearray(head)
    while len(start) < head_cap:
        chunk = stream.read(min(CHUNK, head_cap - len(start)))
        if not chunk:
            break
        start += chunk
    tail_cap = cap - len(start)
    tail = bytearray()
    size, skipped = len(start), 0
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            break
        size += len(chunk)
        tail += chunk
        if len(tail) > tail_cap:
            drop = len(tail) - tail_cap
            del tail[:drop]
            skipped += drop
    return _join(bytes(start), bytes(tail), encoding, size, skipped)


def read_path(path: str | Path, cap: int = MAX_BYTES) -> LogText:
    """Read a log file: a big one is read by seeking, so only `cap` bytes are ever touched."""
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as f:
        if not path.is_file() or size <= cap:  # a device or pipe reports no useful size: stream it
            return read_stream(f, path.name, cap)
        head = f.read(int(cap * HEAD_SHARE))
        encoding = sniff_encoding(head)
        _refuse_binary(head, encoding, path.name)
        tail_len = cap - len(head)
        f.seek(size - tail_len)
        tail = f.read(tail_len)
    return _join(head, tail, encoding, size, size - len(head) - len(tail))


def _join(head: bytes, tail: bytes, encoding: str, size: int, skipped: int) -> LogText:
    head = head[_bom_len(encoding):] if head.startswith(codecs.BOM_UTF8) else head
    if not skipped:
        text = _decode(head + tail, encoding)
        if encoding.startswith("utf-16") and text.startswith("\ufeff"):
            text = text[1:]
        return LogText(text, encoding, size)
    # Cut both parts at line ends so no half line is read as a message; UTF-16 keeps its byte pairs.
    first, last = _decode(head, encoding), _decode(tail if len(tail) % 2 == 0 or not encoding.startswith("utf-16")
                                                   else tail[1:], encoding)
    first = first.lstrip("\ufeff")
    first = first[: first.rfind("\n") + 1] if "\n" in first else first
    last = last[last.find("\n") + 1:] if "\n" in last else last
    note_line = first.count("\n")
    marker = f"[bringup: {skipped:,} bytes skipped here]\n"
    return LogText(first + marker + last, encoding, size, skipped, note_line + 1)


def read_text(data: bytes | str, name: str = "the log") -> LogText:
    """Decode text already in memory (a paste, a test), with the same encoding rules."""
    if isinstance(data, str):
        return LogText(data, "utf-8", len(data))
    import io

    return read_stream(io.BytesIO(data), name, max(len(data), 1))
