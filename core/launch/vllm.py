"""vLLM's command line: `vllm serve MODEL ...` (run as `python -m vllm.entrypoints.cli.main serve`, the
`vllm` console script's own entry point). Only what the user chose is spelled out. Flag names:
vllm 0.33.0 engine/arg_utils.py (--attention-backend :1114, --block-size :1387, --enable-prefix-caching
:1402, --mamba-ssm-cache-dtype :1428); vLLM picks the platform itself, so there is no --device."""

from __future__ import annotations

import importlib.util


def installed() -> bool:
    """Whether vLLM can be launched from this environment (Run offers it only then)."""
    return importlib.util.find_spec("vllm") is not None


def program(python: str | None) -> list[str]:
    return [python, "-m", "vllm.entrypoints.cli.main", "serve"] if python else ["vllm", "serve"]


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
