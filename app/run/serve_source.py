"""What the Run tab serves for the model on the map."""

from __future__ import annotations

from pathlib import Path

from bringup.core.layermap.vocabulary import LayerMap


def serve_source_for(layer_map: LayerMap | None) -> str:
    """A checkpoint folder (or GGUF file) when the model came from one with weights; the hub id or catalogue name
    otherwise (the engine downloads it, or says clearly why it cannot); "default" (the bundled tiny
    checkpoint with Nemotron-3-Nano's pattern) when nothing else is runnable here."""
    if layer_map is None:
        return "default"
    from bringup.core.sources.catalogue import DEFAULT_MODEL

    path = Path(layer_map.source).expanduser()
    if path.suffix.lower() == ".gguf" and path.is_file():
        return str(path)  # a GGUF file is the whole checkpoint
    from bringup.core.sources.packaged import cached_path

    fetched = cached_path(layer_map.source) if "/" not in layer_map.source else None
    if fetched is not None:  # `smollm2`, or its catalogue name, once fetched from the package index
        return str(fetched)
    folder = path if path.is_dir() else path.parent if path.is_file() else None
    if folder is not None:
        return str(folder) if any(folder.glob("*.safetensors")) else "default"
    if DEFAULT_MODEL in (layer_map.name, layer_map.source) or layer_map.name.endswith(DEFAULT_MODEL):
        return "default"
    from bringup.core.launch import model_path

    return model_path(layer_map)  # a hub id: the engine downloads it, or says why it cannot
