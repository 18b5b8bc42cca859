"""Runs inside a vLLM oracle environment (`tools/oracle/envs.py vllm X`): each command line through the
release's own `vllm serve` argument parser and serve checks, `AsyncEngineArgs.from_cli_args` and
`create_engine_config` with the API server's usage context (the VllmConfig with its platform's
`check_and_update_config`), on a faked device. Prints one JSON line a cell.

    python probe_vllm.py job.json      # {"target": "xpu", "cells": [{"id": ..., "argv": ["MODEL_DIR", ...]}]}

The stand-ins: the device (fake_device.py: torch's queries) and its vLLM platform, chosen as vLLM's own
plugin would on that machine (vllm/platforms/__init__.py builtin_platform_plugins; CUDA without NVML
is vLLM's NonNvmlCudaPlatform, which asks torch; ROCm asks amdsmi, faked too); the GPU-only packages (gpu_stubs.py). Reach: parsing,
the engine config, and the block-size alignment a start runs after loading the model, on stand-in layers
(vllm_layers.py); not the workers (model load, KV cache sizing, graph capture), which are the oracle's
recorded limits.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# The platform class each target's builtin plugin resolves to (vllm/platforms/__init__.py); none for NPU
# (vllm-ascend is out of tree) and TPU (tpu_inference is out of tree).
PLATFORMS = {"cuda": "vllm.platforms.cuda.NonNvmlCudaPlatform", "rocm": "vllm.platforms.rocm.RocmPlatform",
             "xpu": "vllm.platforms.xpu.XPUPlatform", "cpu": "vllm.platforms.cpu.CpuPlatform"}


def _where(exc: BaseException) -> str:
    from frames import innermost

    return innermost(exc, "vllm", "vllm/")


def _resolved(cfg) -> dict:
    cache, sched, model, par = cfg.cache_config, cfg.scheduler_config, cfg.model_config, cfg.parallel_config
    attn = getattr(cfg, "attention_config", None)
    backend = getattr(attn, "backend", None) if attn is not None else None
    return {
        "block_size": cache.block_size, "enable_prefix_caching": cache.enable_prefix_caching,
        "mamba_cache_mode": getattr(cache, "mamba_cache_mode", None),
        "mamba_block_size": getattr(cache, "mamba_block_size", None),
        "cache_dtype": str(cache.cache_dtype), "mamba_ssm_cache_dtype": str(getattr(cache, "mamba_ssm_cache_dtype", None)),
        "attention_backend": getattr(backend, "name", backend), "dtype": str(model.dtype).removeprefix("torch."),
        "max_num_seqs": sched.max_num_seqs, "max_num_batched_tokens": sched.max_num_batched_tokens,
        "enable_chunked_prefill": sched.enable_chunked_prefill, "max_model_len": model.max_model_len,
        "tensor_parallel_size": par.tensor_parallel_size, "pipeline_parallel_size": par.pipeline_parallel_size,
        "gpu_memory_utilization": cache.gpu_memory_utilization,
        "mamba_page_size_padded": getattr(cache, "mamba_page_size_padded", None),
        "user_specified_block_size": getattr(cache, "user_specified_block_size", None),
    }


def cuda_runtime() -> str | None:
    """The CUDA runtime the release's compiled ops link against (0.33.0: libcudart.so.13), which is the
    `torch.version.cuda` a real start sees: vLLM reads its major for kernel choices (platforms/cuda.py:286-289,
    e.g. the GDN prefill backend on Blackwell, qwen_gdn_linear_attn.py:251-262)."""
    import glob
    import importlib.util
    import re

    folder = importlib.util.find_spec("vllm").submodule_search_locations[0]
    for path in sorted(glob.glob(os.path.join(folder, "_C*.so"))):
        with open(path, "rb") as f:
            found = re.search(rb"libcudart\.so\.(\d+)", f.read())
        if found:
            return f"{found.group(1).decode()}.0"
    return None


def run_cell(parser, argv: list[str]) -> dict:
    """One command line as `vllm serve` takes it: parse (cli/main.py:110), the serve checks (:114,
    cli/serve.py:158-159), the positional model (serve.py:55-57), AsyncEngineArgs.from_cli_args
    (launchers/api_server/entry.py:52) and create_engine_config with the API server's usage context
    (entry.py:82; serve.py:312-313 for several API servers); then the block-size alignment a start runs
    once the model is loaded (vllm_layers.py)."""
    import contextlib
    import io

    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import validate_parsed_serve_args
    from vllm.usage.usage_lib import UsageContext

    import vllm_layers

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(list(argv))
    except SystemExit:
        text = err.getvalue().strip().splitlines()
        return {"accepted": False, "error_type": "SystemExit", "error": (text[-1] if text else "argparse exit")[:600],
                "where": "argparse"}
    stage = "engine config"
    try:
        validate_parsed_serve_args(args)
        if getattr(args, "model_tag", None) is not None:
            args.model = args.model_tag
        cfg = AsyncEngineArgs.from_cli_args(args).create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        stage = "block alignment"
        try:
            layers = vllm_layers.align(cfg)
        except vllm_layers.AlignmentLimit as limit:
            return {"accepted": True, "resolved": _resolved(cfg), "alignment": None, "alignment_limit": str(limit),
                    **_parsed(args, argv)}
    except BaseException as e:
        if os.environ.get("ORACLE_TRACE"):
            traceback.print_exc()
        return {"accepted": False, "error_type": type(e).__name__, "error": str(e).strip()[:600], "where": _where(e),
                "stage": stage}
    return {"accepted": True, "resolved": _resolved(cfg), "alignment": layers, **_parsed(args, argv)}


# Flags only some cells write (vllm_cells.py PARSED): the API server's own, read from the parsed namespace
# (cli/serve.py hands them to uvicorn, not to the engine config).
PARSED_FLAGS = ("--host", "--port")


def _parsed(args, argv: list[str]) -> dict:
    parsed = {f[2:].replace("-", "_"): getattr(args, f[2:].replace("-", "_"), None) for f in PARSED_FLAGS if f in argv}
    return {"parsed": parsed} if parsed else {}


def main() -> None:
    job = json.loads(open(sys.argv[1]).read() if os.path.isfile(sys.argv[1]) else sys.argv[1])
    import gpu_stubs

    gpu_stubs.install([n for n in gpu_stubs.STUBBED if n != "pynvml"])  # no NVML: vLLM asks torch
    gpu_stubs.install_torch_ops()
    import fake_device

    device = fake_device.install(job["target"])
    if device.kind == "cuda":
        import torch

        torch.version.cuda = cuda_runtime() or torch.version.cuda
    if device.kind == "rocm":
        fake_device.install_amdsmi(device)
    if device.kind in ("cuda", "rocm", "xpu"):
        gpu_stubs.triton_with_driver()
    logging.disable(logging.CRITICAL)
    cells = job["cells"]
    try:
        import vllm.platforms as platforms
        from vllm.utils.import_utils import resolve_obj_by_qualname

        if device.kind in PLATFORMS:
            platforms.current_platform = resolve_obj_by_qualname(PLATFORMS[device.kind])()
        if device.kind in ("cuda", "rocm"):
            # The GPU count (TP/PP sizes are checked against it): cuda.py:634-635 and rocm.py:1340 read
            # it through torch.cuda._is_compiled(), which the CPU torch answers False, and faking that
            # makes vLLM import CUDA-only torch internals; the count is answered as 8 GPUs instead.
            type(platforms.current_platform).device_count = classmethod(lambda cls: 8)
        else:  # what vLLM itself finds on a machine with none of its platforms
            platforms.current_platform = resolve_obj_by_qualname(platforms.resolve_current_platform_cls_qualname())()
        from vllm.model_executor.models import registry

        # vLLM inspects the model class in a child process only so that the parent does not initialise
        # CUDA (registry.py:1121-1125); that child would lack the stand-ins, so it runs here instead.
        registry._run_in_subprocess = lambda fn: fn()
        from vllm.entrypoints.common.cli_args import make_arg_parser
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
        import vllm.model_executor.layers.rotary_embedding  # noqa: F401  registers torch.ops.vllm's rope ops

        gpu_stubs.install_torch_ops(gpu_stubs.LATE_TORCH_OPS)
    except BaseException as e:
        for cell in cells:
            print("ORACLE " + json.dumps({"id": cell["id"], "accepted": False, "error_type": type(e).__name__,
                                          "error": f"platform: {e}"[:600], "where": _where(e)}), flush=True)
        return
    for cell in cells:
        out = {"id": cell["id"], **run_cell(parser, cell["argv"])}
        print("ORACLE " + json.dumps(out, default=str), flush=True)
    print("ORACLE_STUBS " + json.dumps(gpu_stubs.stub_hits()), flush=True)


if __name__ == "__main__":
    main()
