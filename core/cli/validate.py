"""`bringup validate SOURCE --target TARGET --device DEV [...] [--matrix] [--json]`.

Checks a launch configuration against the target's rules before anything is launched: `embedded`
(our engine) or `sglang==X.Y.Z`. Exit code 0 when the launch would start, 1 when a rule says it
would fail, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json

from bringup.core.rules.settings import DEVICES, DTYPES, GPU_GENERATIONS, KV_DTYPES, MAMBA_STRATEGIES, SSM_DTYPES


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="config.json path, model folder, catalogue name or hub id")
    parser.add_argument("--target", required=True, help="embedded, sglang==X.Y.Z (e.g. sglang==0.5.17) or vllm==X.Y.Z (rules read from 0.33.0)")
    parser.add_argument("--device", required=True, choices=DEVICES, help="device to launch on (rocm: a ROCm build, --device cuda)")
    parser.add_argument("--attention-backend", default=None, help="e.g. triton, intel_xpu, fa3, flashinfer (default: the target's)")
    parser.add_argument("--mamba-strategy", default="auto", choices=MAMBA_STRATEGIES, help="mamba radix cache strategy (default auto)")
    parser.add_argument("--page-size", type=int, default=None, help="tokens per KV page (default: the target's)")
    parser.add_argument("--tp", type=int, default=1, help="tensor parallel size")
    parser.add_argument("--pp", type=int, default=1, help="pipeline parallel size")
    parser.add_argument("--disable-radix-cache", action="store_true", help="no prefix cache (SGLang)")
    parser.add_argument("--disable-overlap-schedule", action="store_true", help="no overlap scheduler (SGLang)")
    parser.add_argument("--dtype", default="auto", choices=DTYPES)
    parser.add_argument("--kv-dtype", default="auto", choices=KV_DTYPES)
    parser.add_argument("--mamba-ssm-dtype", default=None, choices=SSM_DTYPES, help="SSM state dtype (default: config, else float32)")
    parser.add_argument("--linear-attn-backend", default=None, help="SGLang --linear-attn-backend (default triton)")
    parser.add_argument("--gpu", default=None, choices=GPU_GENERATIONS, help="CUDA GPU generation (decides SGLang's default backend)")
    parser.add_argument("--model-path", default=None, help="model path to put in the launch command (default: hub id or folder)")
    parser.add_argument("--probe", action="store_true", help="also probe this machine and warn when the device is not here "
                        "(and, without --device-memory, plan for the probed device's memory)")
    parser.add_argument("--device-memory", default=None, metavar="BYTES|auto",
                        help="memory of one device (e.g. 64GiB, a device name such as max1550 or h200, or auto: ask the probe): adds the memory plan of this "
                             "launch; weights that do not fit or zero planned requests make it fail")
    parser.add_argument("--matrix", action="store_true", help="add the compatibility matrix (device x strategy x backend)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _device_memory(args) -> tuple[int | None, str]:
    """(bytes of one device, how it was found) from --device-memory, or the probe with --probe; (None, "") else."""
    given = args.device_memory or ("auto" if args.probe else None)
    if given is None:
        return None, ""
    from bringup.core.planner.device import resolve_device_memory

    device = "cuda" if args.device == "rocm" else args.device
    _, size, notes = resolve_device_memory(given, device, args.target)
    return size, notes[0] if notes else "as given"


def main(args: argparse.Namespace) -> int:
    from bringup.core.rules import LaunchSettings, parse_target
    from bringup.core.validate import compatibility_matrix, validate
    from bringup.core.sources.resolve import load_layer_map

    target = parse_target(args.target)  # bad target text fails before any loading
    if args.matrix and target.engine == "vllm":
        from bringup.core.errors import UserError

        raise UserError("--matrix is SGLang's device x strategy x backend grid; validate vLLM launches one at a time")
    settings = LaunchSettings(
        device=args.device, attention_backend=args.attention_backend, mamba_strategy=args.mamba_strategy,
        page_size=args.page_size, tp=args.tp, pp=args.pp, disable_radix_cache=args.disable_radix_cache,
        disable_overlap_schedule=args.disable_overlap_schedule, dtype=args.dtype, kv_dtype=args.kv_dtype,
        mamba_ssm_dtype=args.mamba_ssm_dtype, linear_attn_backend=args.linear_attn_backend, gpu=args.gpu,
    )
    layer_map = load_layer_map(args.source, pp=args.pp)
    available = None
    if args.probe:
        from bringup.core.probe.runner import run_probe

        available = run_probe().available_devices()
    memory, how = _device_memory(args)
    result = validate(layer_map, target, settings, model_path=args.model_path, available_devices=available,
                      device_memory=memory, memory_how=how)
    matrix = compatibility_matrix(layer_map, target, settings) if args.matrix else None
    if args.json:
        doc = result.to_json()
        if matrix is not None:
            doc["matrix"] = matrix.to_json()
        print(json.dumps(doc, indent=2))
    else:
        from bringup.core.cli.validate_text import render_matrix, render_result

        print(render_result(result))
        if matrix is not None:
            print()
            print(render_matrix(matrix))
    return 0 if result.ok else 1
