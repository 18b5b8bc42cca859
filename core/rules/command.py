"""The command line that launches the validated settings: `python -m sglang.launch_server ...` for
SGLang, `bringup serve ...` for the embedded engine. Only what the user chose is spelled out; the
rest is left to the engine's own defaults, which the validation has already resolved."""

from __future__ import annotations

import argparse
import os
import re
import shlex

from bringup.core.layermap.vocabulary import LayerMap
from bringup.core.rules.settings import LaunchSettings
from bringup.core.rules.sglang_backends import SGLANG_DEVICE

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def model_path(lm: LayerMap) -> str:
    """What to hand the engine: a local model folder that has weights, else the hub id (a catalogue
    name launches from its entry's hub id), else the source."""
    from bringup.core.sources.catalogue import find

    source = lm.source or lm.name
    if source.lower().endswith(".gguf") and os.path.isfile(source):
        return source  # a GGUF file is the whole checkpoint (SGLang and vLLM load it by path too)
    if "/" not in source:
        from bringup.core.sources.packaged import cached_path

        fetched = cached_path(source)  # `smollm2` once fetched: the GGUF file it names
        if fetched is not None:
            return str(fetched)
    folder = source if os.path.isdir(source) else os.path.dirname(source) if os.path.isfile(source) else None
    if folder and any(f.endswith(".safetensors") for f in os.listdir(folder)):
        return folder
    if _HUB_ID.match(lm.name or ""):
        return lm.name
    entry = None if folder else find(source)
    if entry is not None:
        return entry.hub_id
    return folder or source


def sglang_argv(path: str, s: LaunchSettings) -> list[str]:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", path, "--device", SGLANG_DEVICE.get(s.device, s.device)]
    if s.attention_backend:
        argv += ["--attention-backend", s.attention_backend]
    if s.linear_attn_backend:
        argv += ["--linear-attn-backend", s.linear_attn_backend]
    if s.mamba_strategy != "auto":
        argv += ["--mamba-radix-cache-strategy", s.mamba_strategy]
    if s.page_size is not None:
        argv += ["--page-size", str(s.page_size)]
    if s.tp > 1:
        argv += ["--tp-size", str(s.tp)]
    if s.pp > 1:
        argv += ["--pp-size", str(s.pp)]  # not --pp: ambiguous in 0.5.23 (--pp-max-micro-batch-size...)
    if s.disable_radix_cache:
        argv.append("--disable-radix-cache")
    if s.disable_overlap_schedule:
        argv.append("--disable-overlap-schedule")
    if s.dtype != "auto":
        argv += ["--dtype", s.dtype]
    if s.kv_dtype != "auto":
        argv += ["--kv-cache-dtype", s.kv_dtype]
    if s.mamba_ssm_dtype:
        argv += ["--mamba-ssm-dtype", s.mamba_ssm_dtype]
    return argv


def _serve_options() -> set[str]:
    """The options `bringup serve` really has (read from its parser), so the command never names one it lacks."""
    try:
        from bringup.core.cli import serve
    except ImportError:
        return {"--device", "--dtype"}
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    return {opt for action in parser._actions for opt in action.option_strings}


def _embedded_flags(s: LaunchSettings) -> list[tuple[str, str]]:
    """(serve option, value) for each engine setting the user chose beyond device and dtype."""
    flags = []
    if s.page_size is not None:
        flags.append(("--page-size", str(s.page_size)))
    if s.kv_dtype != "auto":
        flags.append(("--kv-dtype", s.kv_dtype))
    if s.mamba_ssm_dtype:
        flags.append(("--ssm-dtype", s.mamba_ssm_dtype))
    return flags


def embedded_flags_missing(s: LaunchSettings) -> list[str]:
    """Settings the user chose that `bringup serve` cannot pass on (it lacks the option)."""
    options = _serve_options()
    return [flag for flag, _ in _embedded_flags(s) if flag not in options]


def embedded_argv(path: str, s: LaunchSettings) -> list[str]:
    options = _serve_options()
    argv = ["bringup", "serve", path, "--device", s.device]
    if s.dtype != "auto":
        argv += ["--dtype", s.dtype]
    for flag, value in _embedded_flags(s):
        if flag in options:
            argv += [flag, value]
    return argv


def launch_command(lm: LayerMap, target, s: LaunchSettings, *, path: str | None = None) -> list[str]:
    """argv that launches `s` on `target` ("embedded", "sglang==X.Y.Z", "sglang" or a Target); shlex.join()
    it for a shell."""
    engine = getattr(target, "engine", None) or ("sglang" if str(target).lower().startswith("sglang") else "embedded")
    path = path or model_path(lm)
    if engine == "sglang":
        from bringup.core.sources.default_source import sglang_model_path

        return sglang_argv(sglang_model_path(path), s)
    return embedded_argv(path, s)


def shell(argv: list[str]) -> str:
    return shlex.join(argv)
