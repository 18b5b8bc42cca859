"""Damaged configs for the fuzz tests: the real configs (shared models and the catalogue) with
fields deleted, replaced by junk, retyped or wrapped in lists."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from bringup.core.sources import catalogue

from layermap_helpers import shared_files

CONFIGS = {p.name: json.loads(p.read_text()) for p in shared_files()}
CONFIGS.update({f"catalogue:{e.name}": e.config() for e in catalogue.entries()})

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.one_of(st.integers(-5, 200), st.text(max_size=6), st.none()), max_size=8),
    st.dictionaries(st.text(max_size=6), st.integers(-3, 50), max_size=3),
)


def _paths(cfg: dict, prefix=()):
    for key, value in cfg.items():
        yield prefix + (key,)
        if isinstance(value, dict):
            yield from _paths(value, prefix + (key,))


@st.composite
def damaged_config(draw, configs=None):
    configs = configs or CONFIGS
    name = draw(st.sampled_from(sorted(configs)))
    cfg = json.loads(json.dumps(configs[name]))
    for _ in range(draw(st.integers(1, 4))):
        paths = list(_paths(cfg))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = cfg
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["delete", "replace", "retype", "list_item"]))
        key = path[-1]
        if action == "delete":
            del parent[key]
        elif action == "replace":
            parent[key] = draw(junk)
        elif action == "retype":
            value = parent[key]
            parent[key] = str(value) if not isinstance(value, str) else draw(st.integers(-3, 10**6))
        elif isinstance(parent[key], list) and parent[key]:
            i = draw(st.integers(0, len(parent[key]) - 1))
            parent[key][i] = draw(junk)
        else:
            parent[key] = [parent[key]]
    return name, cfg
