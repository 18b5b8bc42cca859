"""Handing freed heap back to the system: glibc keeps what a process freed (a re-layout's temporaries,
a parsed file's objects) as its own unless asked, so the resident memory stays at its high-water mark."""

from __future__ import annotations

import ctypes


def trim_heap() -> None:
    """malloc_trim(0): the free pages of every arena back to the system (a few ms for a model's load)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the memory stays with the process, nothing else changes
        pass
