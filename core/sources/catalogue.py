"""The bundled catalogue: our own list of bring-up targets and the config facts each needs.

`resources/catalogue.json` names each target (hub id, family, why it matters) and carries the
handful of config fields its layer map and parameter count need, under their Hugging Face names,
so that every target can be inspected offline. The hub's config.json stays the authority: a hub
id is fetched when the hub is reachable; the catalogue is what works without it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

DEFAULT_MODEL = "NVIDIA-Nemotron-3-Nano-30B-A3B"
CATALOGUE_PATH = Path(__file__).resolve().parents[1] / "resources" / "catalogue.json"


@dataclass(frozen=True)
class CatalogueEntry:
    name: str  # short name, the hub repo name
    hub_id: str
    family: str  # architecture family, as the UI groups them
    why: str  # one line: why this model matters for bring-up
    facts: dict = field(compare=False, hash=False)  # config fields, HF names
    # Where the package index ships real weights (a GGUF file): see core/sources/packaged.py.
    package: dict | None = field(default=None, compare=False, hash=False)

    def config(self) -> dict:
        """A config dict built from the facts (a fresh copy: callers may mutate it)."""
        return json.loads(json.dumps(self.facts))


def _catalogue_path() -> Path:
    # Installed (non-editable) copies keep resources inside the bringup package.
    if CATALOGUE_PATH.is_file():
        return CATALOGUE_PATH
    import bringup.resources

    return Path(bringup.resources.__file__).resolve().parent / "catalogue.json"


@lru_cache(maxsize=1)
def entries() -> tuple[CatalogueEntry, ...]:
    data = json.loads(_catalogue_path().read_text(encoding="utf-8"))
    return tuple(
        CatalogueEntry(name=m["name"], hub_id=m["hub_id"], family=m["family"], why=m["why"], facts=m["facts"],
                       package=m.get("package"))
        for m in data["models"]
    )


def names() -> list[str]:
    return [e.name for e in entries()]


def find(text: str) -> CatalogueEntry | None:
    """The entry whose name or hub id is `text` (case-insensitive), or None."""
    key = text.strip().lower()
    for e in entries():
        if key in (e.name.lower(), e.hub_id.lower()):
            return e
    return None


def default_entry() -> CatalogueEntry:
    entry = find(DEFAULT_MODEL)
    assert entry is not None, "the default model must be in resources/catalogue.json"
    return entry
