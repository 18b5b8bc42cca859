"""The engine's own code around a traceback frame, where that release's source is at hand.

Looked for, in order: the frame's own file (the log came from this machine), then an unpacked
release under the sources folder (`~/.cache/bringup/sources/<engine>-<version>/`, or the folder in
BRINGUP_ENGINE_SOURCES), which `pip download --no-deps <engine>==<version>` and unzipping fill; the
project's maintainer scripts (tools/sglang_facts.py, tools/vllm_facts.py) read the same wheels.
Nothing is downloaded here: a diagnosis never reaches the network.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .failure import Frame

AROUND = 4  # lines shown above and below the frame's line


@dataclass(frozen=True)
class SourceExcerpt:
    path: str  # where the code was read
    first_line: int  # the number of lines[0]
    lines: tuple[str, ...]
    line: int  # the frame's line
    release: str  # "vllm 0.10.2" / "this machine's file"


def sources_root() -> Path:
    return Path(os.environ.get("BRINGUP_ENGINE_SOURCES") or Path.home() / ".cache" / "bringup" / "sources")


def _excerpt(path: Path, line: int, release: str) -> SourceExcerpt | None:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    if not 1 <= line <= len(text):
        return None
    start = max(1, line - AROUND)
    return SourceExcerpt(str(path), start, tuple(text[start - 1:line + AROUND]), line, release)


def frame_source(frame: Frame, version: str | None = None) -> SourceExcerpt | None:
    """The code around the frame's line, or None when no copy of that file is at hand."""
    own = Path(frame.file)
    if own.is_file():
        return _excerpt(own, frame.line, "this machine's file")
    engine = frame.engine
    if not engine or not version:
        return None
    root = sources_root() / f"{engine.replace('_', '-')}-{version}"
    candidate = root / frame.relative
    if candidate.is_file():
        return _excerpt(candidate, frame.line, f"{engine} {version}")
    return None
