"""What the engine loads: a source and a load format to a model with its weights.

The choice between the checkpoint's weights (`loader.py`) and seeded random weights at the real size
(`dummy_weights.py`) is made here, once, so neither building block needs the other.
"""

from __future__ import annotations

import logging
from pathlib import Path

from bringup.core.errors import UserError
from bringup.core.sources.default_model import DEFAULT_CHECKPOINT_NAME, checkpoint_dir, is_complete, is_default, resolve_default

LOAD_FORMATS = ("auto", "dummy")
log = logging.getLogger("bringup.server")


def check_load_format(load_format: str | None) -> str:
    value = (load_format or "auto").strip().lower()
    if value not in LOAD_FORMATS:
        raise UserError(f"--load-format {load_format!r} is not known; use auto (the checkpoint's weights) "
                        "or dummy (random weights at the model's real size)")
    return value


def load_model(source, *, device="cpu", dtype="auto", progress=None, load_format: str = "auto"):
    """LoadedModel of `source`: its checkpoint (auto), or the config's model at full size with seeded
    random weights (dummy)."""
    if check_load_format(load_format) == "dummy":
        from .dummy_weights import load_dummy_model

        return load_dummy_model(source, device=device, dtype=dtype, progress=progress)
    from .loader import load_model as load_checkpoint

    return load_checkpoint(source, device=device, dtype=dtype, progress=progress)


def model_source(source: str | None, load_format: str = "auto") -> tuple[str, str]:
    """(what the engine loads, the served model name). A catalogue name loads its hub repository
    (auto) or its config facts (dummy); either way it is served under the catalogue name."""
    if is_default(source) and not is_complete(checkpoint_dir()):
        log.info("Generating the default model (first run only) into %s", checkpoint_dir())
    default = resolve_default(source)
    if default is not None:
        return default, DEFAULT_CHECKPOINT_NAME
    path = Path(source)
    if path.exists():
        return source, path.name
    from bringup.core.sources import catalogue

    entry = catalogue.find(source)
    if entry is not None and entry.name.lower() == source.strip().lower():
        return (entry.name if load_format == "dummy" else entry.hub_id), entry.name
    return source, source
