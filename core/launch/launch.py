"""`Launch`: one engine launch, described once. Validate builds it and shows `shell(launch.argv())`;
Run starts `launch.argv(endpoint=..., python=sys.executable)`: the same arguments, plus where to
listen (and, for SGLang, its metrics switch) and the interpreter that runs it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bringup.core.rules.settings import LaunchSettings

ENGINES = ("embedded", "sglang")


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True)
class Launch:
    engine: str  # "embedded" | "sglang"
    model: str  # what the engine loads: a checkpoint folder, a hub id, or "default" (the bundled one)
    settings: "LaunchSettings"  # what Validate checked
    device: str | None = None  # overrides settings.device where it runs; "auto": the engine picks
    extra: tuple[str, ...] = field(default=())  # engine options beyond the settings (e.g. --mem-fraction 0.5)

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"engine {self.engine!r} is not one of {', '.join(ENGINES)}")

    @property
    def run_device(self) -> str:
        return self.device or self.settings.device

    def with_(self, **changes) -> "Launch":
        return replace(self, **changes)

    def argv(self, *, endpoint: Endpoint | None = None, python: str | None = None) -> list[str]:
        """The command: as shown (`bringup serve ...`, `python -m sglang.launch_server ...`) without
        `python`; as run with `python` (the interpreter) and the `endpoint` to listen on."""
        if self.engine == "sglang":
            from bringup.core.launch import sglang as builder
        else:
            from bringup.core.launch import embedded as builder
        return builder.program(python) + builder.arguments(self) + list(self.extra) + builder.endpoint_arguments(endpoint)

    def to_json(self) -> dict:
        return {"engine": self.engine, "model": self.model, "settings": self.settings.to_json(),
                "device": self.run_device, "extra": list(self.extra)}


def launch_for(target, model: str, settings: "LaunchSettings") -> Launch:
    """The Launch of `settings` on `target` ("embedded", "sglang==X.Y.Z", "sglang" or a Target)."""
    engine = getattr(target, "engine", None) or ("sglang" if str(target).lower().startswith("sglang") else "embedded")
    return Launch(engine, model, settings)


def shell(argv: list[str]) -> str:
    return shlex.join(argv)
