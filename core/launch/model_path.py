"""What a launch names as its model for a layer map: the model itself (its folder with weights, or
its hub id), as a command to copy elsewhere would name it."""

from __future__ import annotations

import os
import re

from bringup.core.layermap.vocabulary import LayerMap

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def model_path(lm: LayerMap) -> str:
    """What to hand the engine: a local model folder that has weights, else the hub id (a catalogue
    name launches from its entry's hub id), else the source."""
    from bringup.core.sources.catalogue import find

    source = lm.source or lm.name
    if source.lower().endswith(".gguf") and os.path.isfile(source):
        return source  # a GGUF file is the whole checkpoint (SGLang and vLLM load it by path too)
    if "/" not in source:
        from bringup.core.sources.packaged import cached_path

        fetched = cached_path(source)  # `smollm2` once fetched: the GGUF file it names
        if fetched is not None:
            return str(fetched)
    folder = source if os.path.isdir(source) else os.path.dirname(source) if os.path.isfile(source) else None
    if folder and any(f.endswith(".safetensors") for f in os.listdir(folder)):
        return folder
    if _HUB_ID.match(lm.name or ""):
        return lm.name
    entry = None if folder else find(source)
    if entry is not None:
        return entry.hub_id
    return folder or source
