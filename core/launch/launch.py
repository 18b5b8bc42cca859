"""`Launch`: one engine launch, described once. Validate builds it and shows `shell(launch.argv())`;
Run starts `launch.argv(endpoint=..., python=sys.executable)`: the same arguments, plus where to
listen (and, for SGLang, its metrics switch) and the interpreter that runs it."""

from __future__ import annotations

import importlib
import shlex
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bringup.core.rules.settings import LaunchSettings

# engine -> its command-line builder in this package: `program(python)`, `arguments(launch)`,
# `endpoint_arguments(endpoint)`. A new engine (vLLM) is one more module and one more line here.
BUILDERS = {"embedded": "embedded", "sglang": "sglang", "vllm": "vllm"}


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True)
class Launch:
    engine: str  # "embedded" | "sglang" | "vllm"
    model: str  # what the engine loads: a checkpoint folder, a hub id, or "default" (the bundled one)
    settings: "LaunchSettings"  # what Validate checked
    device: str | None = None  # overrides settings.device where it runs; "auto": the engine picks
    extra: tuple[str, ...] = field(default=())  # engine options beyond the settings (e.g. --mem-fraction 0.5)
    tensor_dump: str | None = None  # SGLang: the folder for its per-layer dumps (--debug-tensor-dump-output-folder)
    engine_version: str | None = None  # the engine release that will run, when known (else: the installed one)

    def __post_init__(self) -> None:
        if self.engine not in BUILDERS:
            raise ValueError(f"engine {self.engine!r} is not one of {', '.join(BUILDERS)}")

    @property
    def run_device(self) -> str:
        return self.device or self.settings.device

    def with_(self, **changes) -> "Launch":
        return replace(self, **changes)

    def argv(self, *, endpoint: Endpoint | None = None, python: str | None = None) -> list[str]:
        """The command: as shown (`bringup serve ...`, `python -m sglang.launch_server ...`) without
        `python`; as run with `python` (the interpreter) and the `endpoint` to listen on."""
        builder = importlib.import_module(f"{__package__}.{BUILDERS[self.engine]}")
        return builder.program(python) + builder.arguments(self) + list(self.extra) + builder.endpoint_arguments(endpoint)

    def to_json(self) -> dict:
        out = {"engine": self.engine, "model": self.model, "settings": self.settings.to_json(),
               "device": self.run_device, "extra": list(self.extra)}
        if self.tensor_dump is not None:
            out["tensor_dump"] = self.tensor_dump
        return out


def launch_for(target, model: str, settings: "LaunchSettings") -> Launch:
    """The Launch of `settings` on `target` ("embedded", "sglang==X.Y.Z", "sglang" or a Target)."""
    if isinstance(target, str):
        from bringup.core.rules.targets import read_target

        engine = read_target(target)[0]
    else:
        engine = target.engine
    return Launch(engine, model, settings)


def shell(argv: list[str]) -> str:
    return shlex.join(argv)
