"""What a start-up compiled: Triton writes each kernel it compiles into its own directory under its
cache (TRITON_CACHE_DIR, else $TRITON_HOME/.triton/cache, else ~/.triton/cache, as Triton 3.x
chooses it); a kernel found there is loaded, not compiled, and adds nothing. So the directories
that appear during a stage are the kernels that stage compiled, and a second start that finds them
all adds none (the log shows the cache was reused). Read from the file system: core never imports
Triton."""

from __future__ import annotations

import os
from pathlib import Path


def triton_cache_dir() -> Path:
    if os.environ.get("TRITON_CACHE_DIR"):
        return Path(os.environ["TRITON_CACHE_DIR"])
    return Path(os.environ.get("TRITON_HOME") or Path.home()) / ".triton" / "cache"


def cached_kernels(cache: Path | None = None) -> set[str]:
    """Names of the kernel directories in Triton's cache now (empty when there is no cache yet)."""
    cache = triton_cache_dir() if cache is None else cache
    try:
        return {entry.name for entry in cache.iterdir() if entry.is_dir()}
    except (FileNotFoundError, NotADirectoryError):
        return set()


def describe_compiles(before: set[str], after: set[str], cache: Path | None = None) -> str:
    new = len(after - before)
    where = triton_cache_dir() if cache is None else cache
    if new:
        return f"Triton compiled {new} kernels (cache {where}, {len(before)} there before)"
    return f"Triton compiled nothing new (cache {where}: {len(before)} kernels reused or none needed)"
