"""The embedded engine's command line: `bringup serve MODEL ...`. Only options that `bringup serve`
has (core/engine/facts.py SERVE_OPTIONS) are named; the rules warn about the settings it lacks."""

from __future__ import annotations

from bringup.core.engine import facts


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


def arguments(launch) -> list[str]:
    argv = [launch.model]
    if launch.run_device != "auto":  # "auto": the engine picks xpu, cuda or cpu itself
        argv += ["--device", launch.run_device]
    for flag, value in setting_flags(launch.settings):
        if flag in facts.serve_flags():
            argv += [flag, value]
    return argv


def endpoint_arguments(endpoint) -> list[str]:
    return [] if endpoint is None else ["--host", endpoint.host, "--port", str(endpoint.port)]
