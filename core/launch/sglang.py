"""SGLang's command line: `python -m sglang.launch_server --model-path ...`. Only what the user chose
is spelled out; the rest is left to SGLang's defaults, which the validation has already resolved.
Flag names: sglang/srt/server_args.py of the profiled releases (sglang-notes §5.3)."""

from __future__ import annotations

from bringup.core.versions import release

# --debug-tensor-dump-output-folder writes one Pass{N}.pt of leaf outputs per forward per rank from 0.5.5 on
# (sglang/srt/debug_utils/tensor_dump_forward_hook.py is first in the 0.5.5 wheel; same file in 0.5.6, 0.5.17,
# 0.5.23). 0.4.4-0.5.4 accept the flag but write no such files (in 0.5.4 only logits_processor.py and grok.py read it).
TENSOR_DUMP_SINCE = release("0.5.5")


class TensorDumpUnsupported(RuntimeError):
    """The SGLang release that would run writes no per-layer dumps."""


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sglang")
    except PackageNotFoundError:
        return None


def tensor_dump_arguments(folder: str, version: str | None) -> list[str]:
    """The dump flag for `version` (None: unknown, the flag is given and SGLang judges it)."""
    try:
        known = release(version) if version else None
    except ValueError:
        known = None  # a local build's odd version: SGLang judges the flag itself
    if known is not None and known < TENSOR_DUMP_SINCE:
        raise TensorDumpUnsupported(
            f"SGLang {version} writes no per-layer tensor dumps (--debug-tensor-dump-output-folder writes "
            f"TP*_PP*_Rank*_pid*/Pass*.pt files from 0.5.5 on); install sglang>=0.5.5 or start without 'Dump layers'")
    return ["--debug-tensor-dump-output-folder", folder]


def program(python: str | None) -> list[str]:
    return [python or "python", "-m", "sglang.launch_server"]


def arguments(launch) -> list[str]:
    from bringup.core.rules.sglang_backends import SGLANG_DEVICE
    from bringup.core.sources.default_source import sglang_model_path

    s = launch.settings
    argv = ["--model-path", sglang_model_path(launch.model)]
    if launch.run_device != "auto":  # "auto": SGLang picks the device itself
        argv += ["--device", SGLANG_DEVICE.get(launch.run_device, launch.run_device)]
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
    if launch.tensor_dump:
        argv += tensor_dump_arguments(launch.tensor_dump, launch.engine_version or installed_version())
    return argv


def endpoint_arguments(endpoint) -> list[str]:
    """Where to listen, and /metrics on (the Run tab's graphs read it)."""
    return [] if endpoint is None else ["--host", endpoint.host, "--port", str(endpoint.port), "--enable-metrics"]
