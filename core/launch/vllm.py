"""vLLM's command line: `vllm serve MODEL ...`. Only what the user chose is spelled out. Flag names:
vllm 0.33.0 engine/arg_utils.py (--attention-backend :1114, --block-size :1387, --enable-prefix-caching
:1402, --mamba-ssm-cache-dtype :1428); vLLM picks the platform itself, so there is no --device.

vLLM pins its own torch, so it often lives in an environment of its own: Run starts the `vllm` command
of the interpreter's environment if it has one, else the one on PATH (`vllm_command`), and offers vLLM
exactly when one of them exists (`installed`)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys


def vllm_command(python: str | None = None) -> list[str] | None:
    """The program that runs `vllm serve` from `python`'s environment (default: this interpreter),
    else from PATH; None when there is none. The `vllm` console script is vLLM's own entry point
    (vllm/entrypoints/cli/main.py); without the script, an importable vllm runs as `python -m`."""
    python = python or sys.executable
    beside = os.path.join(os.path.dirname(python), "vllm")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return [beside, "serve"]
    if os.path.realpath(python) == os.path.realpath(sys.executable) and importlib.util.find_spec("vllm") is not None:
        return [python, "-m", "vllm.entrypoints.cli.main", "serve"]
    found = shutil.which("vllm")
    return [found, "serve"] if found else None


def installed() -> bool:
    """Whether vLLM can be launched from here (the Run tab offers it only then)."""
    return vllm_command() is not None


def program(python: str | None) -> list[str]:
    if not python:
        return ["vllm", "serve"]  # as shown: what a user types
    command = vllm_command(python)
    if command is None:
        raise RuntimeError(f"vLLM is not installed here: there is no `vllm` command beside {python} or on PATH. "
                           "Install it (pip install vllm) and start again, or start it yourself and use Attach to URL")
    return command


def arguments(launch) -> list[str]:
    from bringup.core.sources.default_source import sglang_model_path

    s = launch.settings
    argv = [sglang_model_path(launch.model)]  # a hub id or a folder, as for SGLang
    if s.attention_backend:
        argv += ["--attention-backend", s.attention_backend.upper()]
    if s.page_size is not None:
        argv += ["--block-size", str(s.page_size)]
    if s.tp > 1:
        argv += ["--tensor-parallel-size", str(s.tp)]
    if s.pp > 1:
        argv += ["--pipeline-parallel-size", str(s.pp)]
    if s.disable_radix_cache:
        argv.append("--no-enable-prefix-caching")
    if s.dtype != "auto":
        argv += ["--dtype", s.dtype]
    if s.kv_dtype != "auto":
        argv += ["--kv-cache-dtype", s.kv_dtype]
    if s.mamba_ssm_dtype:
        argv += ["--mamba-ssm-cache-dtype", s.mamba_ssm_dtype]
    return argv


def endpoint_arguments(endpoint) -> list[str]:
    """Where to listen; vLLM's API server always serves /metrics (`vllm:` names)."""
    return [] if endpoint is None else ["--host", endpoint.host, "--port", str(endpoint.port)]
