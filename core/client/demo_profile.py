"""Demo profiles: what a stakeholder demo pins (model, device, settings, prompts), from a JSON file.

After AI Playground's demo profiles: the file fixes the choices, the demo window locks its controls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from bringup.core.errors import UserError
from bringup.resources import RESOURCES

DEFAULT_PROFILE = RESOURCES / "demo" / "default.json"
_DEVICES = ("auto", "cpu", "cuda", "xpu")
_KINDS = {list: "a list", str: "a string", int: "an integer", dict: "an object"}  # JSON's words for the types


@dataclass
class DemoProfile:
    title: str
    model: str  # a source `bringup serve` accepts ("default" is the bundled tiny checkpoint)
    device: str = "auto"
    prompts: list[str] = field(default_factory=list)
    max_tokens: int = 96
    temperature: float = 0.7
    concurrency: int = 4  # prompts in flight at once, so the pools visibly fill
    layer_map_source: str | None = None  # what the map shows; defaults to the catalogue default
    settings: dict = field(default_factory=dict)  # extra `bringup serve` flags, e.g. {"mem-fraction": 0.2}

    def serve_flags(self) -> list[str]:
        flags: list[str] = []
        for key, value in self.settings.items():
            flags += [f"--{key}", str(value)]
        return flags


def load_profile(path: str | Path | None = None) -> DemoProfile:
    """Read and check a profile (None: the bundled default); every problem names the file and the field."""
    path = Path(path) if path else DEFAULT_PROFILE
    bundled = DEFAULT_PROFILE.parent / f"{path.name}.json"
    if not path.exists() and path.suffix == "" and path.name == str(path) and bundled.is_file():
        path = bundled  # `--profile smollm2`: a profile that ships in resources/demo/
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        shipped = ", ".join(sorted(p.stem for p in DEFAULT_PROFILE.parent.glob("*.json")))
        raise UserError(f"demo profile {path} does not exist; pass --profile with a JSON file "
                        f"like {DEFAULT_PROFILE.name} in the resources folder, or a bundled name ({shipped})") from None
    except ValueError as err:
        raise UserError(f"demo profile {path} is not valid JSON ({err}); fix the file") from None
    if not isinstance(data, dict):
        raise UserError(f"demo profile {path} must hold a JSON object with 'title', 'model' and 'prompts'")

    def need(key: str, kind: type, default=None):
        value = data.get(key, default)
        what = _KINDS.get(kind, "a number")
        if value is None:
            raise UserError(f"demo profile {path}: '{key}' is missing; add it ({what}), as in {DEFAULT_PROFILE.name}")
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise UserError(f"demo profile {path}: '{key}' must be {what}, got {value!r}; fix the file")
        return value

    prompts = need("prompts", list)
    if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
        raise UserError(f"demo profile {path}: 'prompts' must be a non-empty list of non-empty strings")
    device = need("device", str, "auto")
    if device.split(":")[0] not in _DEVICES:
        raise UserError(f"demo profile {path}: 'device' must be one of {', '.join(_DEVICES)}, got {device!r}")
    max_tokens = need("max_tokens", int, 96)
    concurrency = need("concurrency", int, 4)
    if max_tokens < 1 or concurrency < 1:
        raise UserError(f"demo profile {path}: 'max_tokens' and 'concurrency' must be at least 1")
    return DemoProfile(
        title=need("title", str, "Bring-up demo"),
        model=need("model", str),
        device=device,
        prompts=list(prompts),
        max_tokens=max_tokens,
        temperature=float(need("temperature", (int, float), 0.7)),
        concurrency=concurrency,
        layer_map_source=data.get("layer_map_source"),
        settings=need("settings", dict, {}),
    )
