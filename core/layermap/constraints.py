"""What a model's sizes must satisfy for the engine to run it, checked over a whole layer map.

Each typed geometry states its own constraints (`problems()` in layer_geometry.py); this module
adds the model-wide ones (a context that holds at least a one-token prompt and its answer) and
gathers them, one entry per problem with every layer it touches. `bringup inspect` and
`bringup validate` report them as findings (`problem_findings`), and the engine refuses to build a
model that has any (core/engine/models/stack.py), so a config that validates also serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.core.layermap.layer_geometry import GEOMETRY_FIELDS
from bringup.core.layermap.vocabulary import LayerMap

# A request needs one prompt token and room for the token it generates: the smallest context that serves.
MIN_CONTEXT = 2
CONTEXT_KEY = "max_position_embeddings"


@dataclass(frozen=True)
class MapProblem:
    field: str  # the config field to fix
    message: str
    layers: tuple[int, ...] = ()  # the layers it touches (none for a model-wide one)

    def text(self) -> str:
        if not self.layers:
            return self.message
        ids = ", ".join(map(str, self.layers[:8])) + (f" and {len(self.layers) - 8} more" if len(self.layers) > 8 else "")
        return f"{self.message} (layer{'s' if len(self.layers) > 1 else ''} {ids})"


def map_problems(layer_map: LayerMap) -> list[MapProblem]:
    """Every size problem of the map, in layer order, each once with the layers it touches."""
    seen: dict[tuple[str, str], list[int]] = {}
    for layer in layer_map.layers:
        for name in GEOMETRY_FIELDS:
            part = getattr(layer, name)
            for p in part.problems() if part is not None else ():
                seen.setdefault((p.field, p.message), []).append(layer.index)
    out = [MapProblem(f, m, tuple(ids)) for (f, m), ids in seen.items()]
    context = (layer_map.config or {}).get(CONTEXT_KEY)
    if isinstance(context, int) and not isinstance(context, bool) and context < MIN_CONTEXT:
        out.append(MapProblem(CONTEXT_KEY, f"{CONTEXT_KEY} is {context}: the model's context must hold at least "
                                           f"{MIN_CONTEXT} tokens (a prompt token and the one generated)"))
    return out


def problems_message(label: str, problems: list[MapProblem]) -> str:
    """One message for people listing every problem (the engine's build-time refusal)."""
    lines = "; ".join(p.text() for p in problems)
    fields = ", ".join(dict.fromkeys(p.field for p in problems))
    return f"{label}: the config's sizes cannot be built: {lines}. Fix {fields} in config.json"


def problem_findings(problems: list[MapProblem], *, severity: str = "error", engine_words: bool = True) -> list:
    """The problems as findings (`CONFIG_SIZES`), marking the layers they touch."""
    from bringup.core.finding import Finding

    return [Finding.check(
        "CONFIG_SIZES", severity,
        f"{p.text()}. The model's modules are built from these sizes, so it cannot load"
        + (" in the embedded engine." if engine_words else "."),
        fix=f"fix {p.field} in config.json (is it the config of this checkpoint?)",
        layers=p.layers, source="core/layermap/layer_geometry.py", stage="model load",
    ) for p in problems]
