"""The embedded engine's command line: `bringup serve MODEL ...`. Only options that `bringup serve`
has (core/engine/facts.py SERVE_OPTIONS) are named; the rules warn about the settings it lacks."""

from __future__ import annotations

from bringup.core.engine import facts
from bringup.core.engine.config import EngineConfig


def program(python: str | None) -> list[str]:
    return [python, "-m", "bringup", "serve"] if python else ["bringup", "serve"]


def setting_flags(s) -> list[tuple[str, str]]:
    """(serve option, value) for each engine setting the user chose beyond the device."""
    flags = []
    if s.dtype != "auto":
        flags.append(("--dtype", s.dtype))
    if s.page_size is not None:
        flags.append(("--page-size", str(s.page_size)))
    if s.kv_dtype != "auto":
        flags.append(("--kv-dtype", s.kv_dtype))
    if s.mamba_ssm_dtype:
        flags.append(("--ssm-dtype", s.mamba_ssm_dtype))
    return flags


def flags_missing(s) -> list[str]:
    """Settings the user chose that `bringup serve` cannot pass on (it lacks the option)."""
    return [flag for flag, _ in setting_flags(s) if flag not in facts.serve_flags()]


def engine_config(launch) -> EngineConfig:
    """The EngineConfig `bringup serve` will build from this launch's arguments (the settings it has
    an option for; flags_missing names the others)."""
    s = launch.settings
    return EngineConfig(launch.model, device=launch.run_device, dtype=s.dtype)


def arguments(launch) -> list[str]:
    return engine_config(launch).serve_arguments()


def endpoint_arguments(endpoint) -> list[str]:
    return [] if endpoint is None else ["--host", endpoint.host, "--port", str(endpoint.port)]
