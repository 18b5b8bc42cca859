"""`bringup plan SOURCE [...] [--json]`: weights, KV and state pools, capacity and the bottleneck.

`--target embedded` is our engine (the sizes it would allocate); `--target sglang==X.Y.Z` is
SGLang's own arithmetic; `--target vllm==X.Y.Z` is vLLM's (core/planner/vllm.py). Weights come from the checkpoint's safetensors headers when SOURCE is a
local folder that has them, else from the layer map's parameter count.
"""

from __future__ import annotations

import argparse
import json
import sys

DEVICES = ("auto", "cpu", "cuda", "xpu", "npu", "mps")


def _fraction(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a fraction such as 0.85") from None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="config.json path, model folder, catalogue name or hub id")
    parser.add_argument("--device-memory", default="auto", metavar="BYTES|auto",
                        help="memory of one device: bytes, a size such as 80GiB or 141G, or a device name (h200, b200, max1550, b60: "
                             "core/planner/device_presets.py); auto asks the device probe "
                             "(CPU: host memory available)")
    parser.add_argument("--device", default="auto", choices=DEVICES,
                        help="device kind (XPU reserves 2 GB more); auto: the probed device with --device-memory auto, "
                             "else cuda for SGLang targets and cpu for the embedded engine")
    parser.add_argument("--target", default="embedded", help="embedded (our engine, the default), sglang==X.Y.Z or vllm==X.Y.Z (vLLM's block pool, "
                             "read from 0.33.0; --max-running-requests is its --max-num-seqs)")
    parser.add_argument("--mem-fraction", type=_fraction, metavar="F",
                        help="share of device memory for weights + pools (default: the target's own auto value)")
    parser.add_argument("--tp", type=int, default=1, metavar="N", help="tensor-parallel size")
    parser.add_argument("--pp", type=int, default=1, metavar="N", help="pipeline-parallel size")
    parser.add_argument("--dtype", default="auto", help="weights dtype (auto: the checkpoint's)")
    parser.add_argument("--kv-dtype", default=None, help="KV cache dtype (default: the weights dtype; fp8_e4m3 ...)")
    parser.add_argument("--conv-dtype", default=None, help="conv state dtype (SGLang default bfloat16)")
    parser.add_argument("--ssm-dtype", default=None, help="SSM state dtype (default float32; SGLang reads mamba_ssm_dtype)")
    parser.add_argument("--context", type=int, metavar="N", help="tokens per request to plan for (SGLang: --context-length)")
    parser.add_argument("--page-size", type=int, metavar="N", help="KV page size in tokens (SGLang 1, embedded 16)")
    parser.add_argument("--max-running-requests", type=int, metavar="N")
    parser.add_argument("--mixed-prefill-size", type=int, metavar="N",
                        help="embedded engine: prompt tokens in a step where requests decode (default: the planner's)")
    sglang = parser.add_argument_group("SGLang targets only")
    sglang.add_argument("--mamba-strategy", default=None, choices=("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"),
                        help="--mamba-radix-cache-strategy (default auto, resolved as the version does)")
    sglang.add_argument("--disable-radix-cache", action="store_true")
    sglang.add_argument("--disable-overlap-schedule", action="store_true")
    sglang.add_argument("--mamba-full-memory-ratio", type=_fraction, metavar="R", help="default 0.9")
    sglang.add_argument("--max-mamba-cache-size", type=int, metavar="SLOTS")
    sglang.add_argument("--chunked-prefill-size", type=int, metavar="N",
                        help="enters the auto mem fraction (default: the release's, by device memory: 2048 to 16384)")
    sglang.add_argument("--cuda-graph-max-bs", type=int, metavar="N",
                        help="decode cuda-graph batch size, reserved for in the auto mem fraction (default: by device memory)")
    sglang.add_argument("--disable-cuda-graph", action="store_true", help="no graph reserve in the auto mem fraction")
    sglang.add_argument("--free-memory", metavar="BYTES",
                        help="memory free on the device before the weights load (SGLang's 'Load weight begin. avail "
                             "mem'); default: the device memory")
    sglang.add_argument("--compare-log", metavar="FILE",
                        help="an SGLang start-up log of this launch: plan from its free memory and weights, and print "
                             "planned vs logged KV tokens, mamba slots and max running requests")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")


def _read_log(path: str):
    from pathlib import Path

    from bringup.core.errors import UserError
    from bringup.core.planner.startup_log import parse_startup_log

    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise UserError(f"cannot read the log {path}: {err.strerror or err}") from None
    return parse_startup_log(text)


def _bytes(text: str) -> int:
    from bringup.core.layermap.sizes import parse_size

    return parse_size(text)


def _sglang_options(args) -> dict:
    options = {
        "mamba_strategy": args.mamba_strategy,
        "disable_radix_cache": args.disable_radix_cache or None,
        "disable_overlap_schedule": args.disable_overlap_schedule or None,
        "mamba_full_memory_ratio": args.mamba_full_memory_ratio,
        "max_mamba_cache_size": args.max_mamba_cache_size,
        "chunked_prefill_size": args.chunked_prefill_size,
        "cuda_graph_max_bs": args.cuda_graph_max_bs,
        "disable_cuda_graph": args.disable_cuda_graph or None,
        "available_memory": _bytes(args.free_memory) if args.free_memory else None,
    }
    return {k: v for k, v in options.items() if v is not None}


def _parallel_blockers(layer_map, target: str, device: str, tp: int, pp: int) -> list[str]:
    """The figures assume the launch starts; heads that do not split over --tp (or layers over --pp)
    stop it at model load, so say so next to them, in the rules' own words."""
    if tp == 1 and pp == 1:
        return []
    from bringup.core.rules.settings import LaunchSettings
    from bringup.core.validate.validate import validate

    result = validate(layer_map, target, LaunchSettings(device=device, tp=tp, pp=pp))
    return [f"this launch would not start: {f.message} Fix: {f.fix}" if f.fix else f"this launch would not start: {f.message}"
            for f in result.findings if f.severity == "error" and f.code.startswith(("TP_", "PP_"))]


def main(args: argparse.Namespace) -> int:
    from bringup.core.errors import UserError
    from bringup.core.planner import parse_target, plan_memory
    from bringup.core.sources.resolve import layer_map_of, load_config

    kind, _ = parse_target(args.target)
    options = _sglang_options(args)
    log = _read_log(args.compare_log) if getattr(args, "compare_log", None) else None
    weights = {}
    if log is not None:
        if kind != "sglang":
            raise UserError("--compare-log reads an SGLang start-up log; use it with --target sglang==X.Y.Z")
        if log.loaded_from is not None:
            options.setdefault("available_memory", log.loaded_from)
        if log.weights is not None:  # per rank in the log; the planner takes the whole model
            weights["weights_bytes"] = log.weights * args.tp * args.pp
    if kind == "embedded" and options:
        raise UserError(f"{', '.join('--' + k.replace('_', '-') for k in options)} apply to --target sglang==X.Y.Z only")
    from bringup.core.planner.device import resolve_device_memory

    device, memory, notes = resolve_device_memory(args.device_memory, args.device, args.target)

    loaded = load_config(args.source)
    layer_map = layer_map_of(loaded, pp=args.pp)  # the config read once, not again from the hub
    plan = plan_memory(
        layer_map, device_memory=memory, target=args.target, device=device, mem_fraction=args.mem_fraction,
        tp=args.tp, pp=args.pp, dtype=args.dtype, kv_dtype=args.kv_dtype, conv_dtype=args.conv_dtype,
        ssm_dtype=args.ssm_dtype, page_size=args.page_size, context=args.context,
        max_running_requests=args.max_running_requests, checkpoint=loaded.path,
        **weights, **options, **({"mixed_prefill_size": args.mixed_prefill_size} if args.mixed_prefill_size else {}),
    )
    plan.notes[:0] = notes
    plan.notes.extend(_parallel_blockers(layer_map, args.target, device, args.tp, args.pp))
    from bringup.core.layermap.constraints import map_problems

    plan.notes.extend(f"this model would not load: {p.text()}. Fix {p.field} in config.json" for p in map_problems(layer_map))
    rows = None
    if log is not None:
        from bringup.core.planner.startup_log import compare

        rows = compare(plan, log)
        if not rows:
            raise UserError(f"{args.compare_log} has no 'KV Cache is allocated' / 'Mamba Cache is allocated' / "
                            "max_running_requests lines to compare with; give the server's start-up log")
    if args.json:
        doc = plan.to_json()
        if rows is not None:
            doc["log_comparison"] = rows
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        from bringup.core.planner.render import render_text

        sys.stdout.write(render_text(plan))
        if rows is not None:
            from bringup.core.planner.startup_log import comparison_text

            sys.stdout.write(comparison_text(rows))
    return 0 if plan.ok else 1
