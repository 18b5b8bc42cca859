"""Which reader produced a layer map, in words, for inspect and the window's details panel.

`LayerMap.provenance["path"]` is "family" (a module under core/families/ that knows the
architecture), "transformers" (the generic path: transformers' config class and a meta-device
build) or "layer_types" (the config's layer_types list alone, without transformers).
"""

from __future__ import annotations


def read_by(provenance: dict) -> str:
    path, reader = provenance.get("path", ""), provenance.get("reader", "")
    if path in ("transformers", "layer_types"):
        return f"generic path: {reader}" if reader else "generic path"
    return f"family module {reader}" if reader else "family module"


def fact_sources(provenance: dict) -> list[tuple[str, str]]:
    """(fact, where it was read) pairs the generic path records, e.g. ("layer kinds", "config.layer_types")."""
    return [(k, str(v)) for k, v in provenance.items() if k not in ("path", "reader")]
