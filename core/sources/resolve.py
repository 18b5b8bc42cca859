"""Where a model's config comes from: a config.json, a model folder, the catalogue, or the hub.

`load_config(source)` resolves what the user typed, in this order: `default` (the bundled
checkpoint the engine serves), an existing file (a config.json, or a llama.cpp `.gguf` whose
metadata stands in for it), an existing folder, a catalogue name, a hub id
(owner/name[@revision]). A hub id that cannot be fetched but is
in the catalogue falls back to the catalogue's offline facts, with a note. `progress(message)` is
called at each step and `cancel()` is polled between steps, for the GUI's background loading.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bringup.core.sources import catalogue, default_source
from bringup.core.sources.config_file import read_config_file
from bringup.core.sources.default_source import default_checkpoint_folder, is_default_name
from bringup.core.errors import UserError
from bringup.core.layermap.vocabulary import LayerMap

Progress = Callable[[str], None]
Cancel = Callable[[], bool]


class LoadCancelled(UserError):
    """The user cancelled loading (the GUI shows it quietly)."""


@dataclass
class LoadedConfig:
    config: dict  # the raw config.json (wrappers and all)
    name: str  # what to call the model
    source: str  # what the user gave
    kind: str  # file | folder | catalogue | hub | gguf
    path: Path | None  # the folder holding config.json, or None for the catalogue and a GGUF file
    notes: list[str] = field(default_factory=list)


def _step(progress: Progress | None, cancel: Cancel | None, message: str, source: str) -> None:
    if cancel is not None and cancel():
        raise LoadCancelled(f"loading {source} was cancelled")
    if progress is not None:
        progress(message)


def _name_from_folder(folder: Path) -> str:
    # Hub cache snapshots live in .../models--owner--name/snapshots/<sha>/: name them owner/name.
    parts = folder.resolve().parts
    for i, part in enumerate(parts):
        if part.startswith("models--") and i + 2 < len(parts) and parts[i + 1] == "snapshots":
            return part[len("models--"):].replace("--", "/", 1)
    return folder.resolve().name


def _from_file(path: Path, source: str) -> LoadedConfig:
    config = read_config_file(path)
    if path.name == "config.json":
        name = _name_from_folder(path.parent)
    else:
        # Files named owner__name.json (as copies of hub configs often are) name the model.
        name = path.stem.replace("__", "/", 1) if "__" in path.stem else path.stem
    return LoadedConfig(config, name, source, "file", path.parent)


def _from_gguf(path: Path, source: str) -> LoadedConfig:
    from bringup.core.sources.gguf_file import model_name, read_gguf_config

    config = read_gguf_config(path)
    facts = config.get("gguf", {})
    # No folder: the planner sizes the weights from the parameter count, at the blocks' own bits where
    # the dtype is left to the file (its quantization_config), else at the dtype asked for.
    loaded = LoadedConfig(config, model_name(path), source, "gguf", None)
    loaded.notes.append(f"GGUF file ({facts.get('architecture')}, weights {facts.get('quantisation')}): "
                        "config and tokenizer from its metadata; with --dtype auto the engine keeps the blocks "
                        "where the model's layers and the device have products for them (the CPU) and "
                        "dequantises the rest; an explicit --dtype dequantises them all (Run names what runs)")
    if facts.get("note"):
        loaded.notes.append(f"GGUF: {facts['note']}")
    return loaded


def _from_folder(folder: Path, source: str) -> LoadedConfig:
    path = folder / "config.json"
    if not path.is_file():
        raise UserError(f"{folder} has no config.json; point at a Hugging Face model folder or at a config file")
    loaded = _from_file(path, source)
    loaded.kind = "folder"
    return loaded


def _from_catalogue(entry: catalogue.CatalogueEntry, source: str) -> LoadedConfig:
    return LoadedConfig(entry.config(), entry.name, source, "catalogue", None)


def _local(text: str) -> tuple[Path | None, str | None]:
    """(path, "file" | "folder") when `text` names something on disk, else (None, None)."""
    try:
        path = Path(text).expanduser()
        if path.is_file():
            return path, "file"
        if path.is_dir():
            return path, "folder"
    except OSError as err:  # a name too long, a loop of links...
        raise UserError(f"{text[:80]!r}: cannot be used as a path ({err.strerror or err}); check it") from None
    except (ValueError, RuntimeError):  # a NUL byte, or ~user that does not exist
        pass
    return None, None


def _looks_like_path(text: str) -> bool:
    return text.startswith((".", "~", "/")) or text.endswith((".json", ".gguf")) or "/" in text or os.sep in text


def _hub_id_shape(text: str) -> bool:
    from bringup.core.sources.hub import looks_like_hub_id

    return looks_like_hub_id(text)


def load_config(source: str | os.PathLike, *, progress: Progress | None = None, cancel: Cancel | None = None) -> LoadedConfig:
    text = os.fspath(source).strip() if isinstance(source, (str, os.PathLike)) else None
    if not text:
        raise UserError(
            "no model given; pass a config.json path, a model folder, a catalogue name "
            f"(e.g. {catalogue.DEFAULT_MODEL}) or a hub id (owner/name)"
        )
    _step(progress, cancel, f"resolving {text}", text)
    if is_default_name(text):  # as `bringup serve default` reads it, even if ./default exists
        return _from_default(text, progress, cancel)
    path, kind = _local(text)
    if kind == "file":
        _step(progress, cancel, f"reading {path}", text)
        from bringup.core.sources.gguf_file import is_gguf_path

        return _from_gguf(path, text) if is_gguf_path(path) else _from_file(path, text)
    if kind == "folder":
        _step(progress, cancel, f"reading {path / 'config.json'}", text)
        return _from_folder(path, text)
    from bringup.core.sources.packaged import cached_path, find_package

    package = find_package(text) if "/" not in text else None
    if package is not None:  # real weights from the package index: the fetched GGUF, else the facts
        path = cached_path(text)
        if path is not None:
            _step(progress, cancel, f"reading {path}", text)
            return _from_gguf(path, text)
        loaded = _from_catalogue(package.entry, text)
        loaded.notes.append(f"its weights are not fetched yet: `bringup models fetch {package.alias}`")
        return loaded
    entry = catalogue.find(text)
    if entry is not None and entry.name.lower() == text.lower():
        return _from_catalogue(entry, text)
    if _hub_id_shape(text) and not text.startswith((".", "/", "~")):
        return _from_hub(text, entry, progress, cancel)
    if _looks_like_path(text):
        raise UserError(f"{text}: no such file or folder; check the path")
    raise UserError(
        f"{text!r} is not a file, a folder, a catalogue name or a hub id. Catalogue names: "
        f"{', '.join(catalogue.names())}; hub ids look like owner/name"
    )


def _from_default(text: str, progress: Progress | None, cancel: Cancel | None) -> LoadedConfig:
    folder = default_checkpoint_folder(progress)
    _step(progress, cancel, f"reading {folder / 'config.json'}", text)
    loaded = _from_folder(folder, text)
    loaded.name = default_source.DEFAULT_CHECKPOINT_NAME
    return loaded


def _from_hub(hub_id: str, entry, progress: Progress | None, cancel: Cancel | None) -> LoadedConfig:
    from bringup.core.sources.hub import download_config

    _step(progress, cancel, f"fetching config.json of {hub_id} from the Hugging Face hub", hub_id)
    try:
        path = download_config(hub_id)
    except UserError as err:
        if entry is None:
            raise
        # Offline but known: the catalogue's facts are enough to draw the map.
        loaded = _from_catalogue(entry, hub_id)
        loaded.notes.append(f"config.json could not be fetched from the hub; showing the bundled catalogue facts for {entry.name}")
        loaded.notes.append(f"hub: {err}")
        return loaded
    _step(progress, cancel, f"reading {path}", hub_id)
    loaded = _from_file(path, hub_id)
    loaded.kind, loaded.name = "hub", hub_id.split("@")[0]
    return loaded


def load_layer_map(
    source: str | os.PathLike,
    *,
    pp: int = 1,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> LayerMap:
    from bringup.core.families import reads_through_transformers

    loaded = load_config(source, progress=progress, cancel=cancel)
    if reads_through_transformers(loaded.config):
        _step(progress, cancel, "building the layer map through transformers (no family module; a meta-device "
              "build takes a few seconds)", loaded.source)
    else:
        _step(progress, cancel, "building the layer map", loaded.source)
    return layer_map_of(loaded, pp=pp)


def layer_map_of(loaded: LoadedConfig, *, pp: int = 1) -> LayerMap:
    """The layer map of a config already loaded, with the loader's notes (e.g. a hub fallback) first."""
    from bringup.core.families import build_layer_map

    layer_map = build_layer_map(loaded.config, name=loaded.name, source=loaded.source, pp=pp)
    if loaded.notes:
        layer_map.notes = tuple(loaded.notes) + tuple(layer_map.notes)
    return layer_map
