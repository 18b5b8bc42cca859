"""The engine's own code around a traceback frame, where that release's source is at hand.

Looked for, in order: the frame's own file (the log came from this machine), then that release in
the sources folder (`~/.cache/bringup/sources/`, or the folder in BRINGUP_ENGINE_SOURCES): an
unpacked `<engine>-<version>/` folder, or the release's wheel itself (`<engine>-<version>-*.whl`, read
inside the zip). `python tools/engine_source.py vllm 0.10.2` puts the wheel there (`pip download
--no-deps`, as tools/sglang_facts.py and tools/vllm_facts.py do). Nothing is downloaded during a
diagnosis: it never reaches the network.
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


def _cut(text: list[str], where: str, line: int, release: str) -> SourceExcerpt | None:
    if not 1 <= line <= len(text):
        return None
    start = max(1, line - AROUND)
    return SourceExcerpt(where, start, tuple(text[start - 1:line + AROUND]), line, release)


def _excerpt(path: Path, line: int, release: str) -> SourceExcerpt | None:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    return _cut(text, str(path), line, release)


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
    import zipfile

    dist = engine.replace("-", "_")
    for wheel in sorted(sources_root().glob(f"{dist}-{version}-*.whl")):
        try:
            with zipfile.ZipFile(wheel) as zf:
                text = zf.read(frame.relative).decode("utf-8", errors="replace").splitlines()
        except (KeyError, OSError, zipfile.BadZipFile):
            continue
        return _cut(text, f"{wheel.name}!{frame.relative}", frame.line, f"{engine} {version}")
    return None
