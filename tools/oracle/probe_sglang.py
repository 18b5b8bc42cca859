"""Runs inside an oracle environment (`tools/oracle/envs.py`): one SGLang command line through the
release's own parser and `ServerArgs.__post_init__`, on a faked device. Prints one JSON line.

    python probe_sglang.py '{"target": "xpu", "argv": ["--model-path", "/tmp/m", ...]}'

Reads the release's own code only; the stand-ins are the device (fake_device.py) and the GPU-only
packages (gpu_stubs.py). Reach: argument parsing and every handler of __post_init__, plus the
mamba slot ratio of the KV cache configurator; not the model runner, the memory pools or the
attention backends' init (their checks are the oracle's recorded limits).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

FIELDS = ("device", "attention_backend", "prefill_attention_backend", "decode_attention_backend", "page_size",
          "disable_overlap_schedule", "disable_radix_cache", "chunked_prefill_size", "max_running_requests",
          "mamba_radix_cache_strategy", "linear_attn_backend", "dtype", "kv_cache_dtype", "mamba_ssm_dtype",
          "tp_size", "pp_size", "cuda_graph_max_bs", "mem_fraction_static")
# Flags only some cells write (cells.py PARSED): where the parser put each one is recorded as "parsed".
PARSED_FLAGS = ("--host", "--port", "--enable-metrics", "--debug-tensor-dump-output-folder", "--mamba-ssm-dtype",
                "--linear-attn-backend")


def _where(exc: BaseException) -> str:
    from frames import innermost

    return innermost(exc, "sglang", "python/sglang/")


class _Resolved:
    """The resolved values: the fields themselves (0.5.17-0.5.18), or `resolved_dict()` where the
    release keeps the resolution beside the record (0.5.19 on: server_args.py resolve_once)."""

    def __init__(self, args) -> None:
        self._args = args
        self._values = args.resolved_dict() if hasattr(args, "resolved_dict") else {}

    def __getattr__(self, name):
        if name in self._values:
            return self._values[name]
        return getattr(self._args, name)


def _mamba_ratio(args):
    """SGLang's own _calculate_mamba_ratio, with its config getters answering from these args."""
    try:
        from sglang.srt.mem_cache import kv_cache_configurator as kc
    except Exception:
        return None
    cls = next((v for v in vars(kc).values() if isinstance(v, type) and hasattr(v, "_calculate_mamba_ratio")), None)
    if cls is None:
        return None
    for getter in ("get_memory", "get_schedule"):
        if hasattr(kc, getter):
            setattr(kc, getter, lambda: args)
    shim = type("Shim", (), {"server_args": args})()
    try:
        return int(cls._calculate_mamba_ratio(shim))
    except AssertionError as e:
        return f"AssertionError: {e}"
    except Exception as e:  # a release whose ratio reads what only the runner sets
        return f"unreached: {type(e).__name__}: {e}"


def run_cell(sa, argv: list[str]) -> dict:
    import contextlib
    import io

    out: dict = {}
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = sa.prepare_server_args(list(argv))
            if hasattr(args, "resolve_once"):  # later releases resolve outside __post_init__ (server_args.py resolve_once)
                args.resolve_once()
    except SystemExit:  # argparse refused the command line
        text = err.getvalue().strip().splitlines()
        out.update(accepted=False, error_type="SystemExit", error=(text[-1] if text else "argparse exit")[:600],
                   where="argparse")
    except BaseException as e:  # the release's own check refused it
        out.update(accepted=False, error_type=type(e).__name__, error=str(e).strip()[:600], where=_where(e))
        if os.environ.get("ORACLE_TRACE"):
            traceback.print_exc()
    else:
        out["accepted"] = True
        view = _Resolved(args)
        out["resolved"] = {k: getattr(view, k, None) for k in FIELDS}
        out["slots_per_request"] = _mamba_ratio(view)
        parsed = {f[2:].replace("-", "_"): getattr(view, f[2:].replace("-", "_"), None) for f in PARSED_FLAGS if f in argv}
        if "--device" not in argv:  # the release found the device itself
            parsed["device"] = view.device
        if parsed:
            out["parsed"] = parsed
    return out


def main() -> None:
    """argv[1]: {"target": ..., "cells": [{"id": ..., "argv": [...]}, ...]}; one ORACLE line per cell."""
    job = json.loads(open(sys.argv[1]).read() if os.path.isfile(sys.argv[1]) else sys.argv[1])
    import gpu_stubs

    gpu_stubs.install()
    import fake_device

    fake_device.install(job["target"])
    logging.disable(logging.CRITICAL)
    try:
        from sglang.srt import server_args as sa
    except BaseException as e:
        for cell in job["cells"]:
            print("ORACLE " + json.dumps({"id": cell["id"], "accepted": False, "error_type": type(e).__name__,
                                          "error": f"import: {e}"[:600], "where": _where(e)}), flush=True)
        return
    for cell in job["cells"]:
        out = {"id": cell["id"], **run_cell(sa, cell["argv"])}
        print("ORACLE " + json.dumps(out, default=str), flush=True)
    print("ORACLE_STUBS " + json.dumps(gpu_stubs.stub_hits()), flush=True)


if __name__ == "__main__":
    main()
