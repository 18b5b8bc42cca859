#!/usr/bin/env python3
"""The layer-level A/B on a GPU, in one go (issue 32's device runs), each `bringup ab --layers` run
as the user runs it, its JSON and wall time written to OUT:

1. tiny: the bundled tiny NemotronH, ours on the GPU (fast kernels, float32) against ours on the CPU
   (reference kernels, float32), a prefill and decode steps;
2. nano: Nemotron-3-Nano-30B-A3B's architecture with dummy weights (`load_format=dummy`, seeded:
   both sides build the same weights), reference kernels against the fast ones, bfloat16, on the GPU;
   `--blocks N` keeps the real widths (hidden 2688, 128 experts, 64 Mamba heads) and the first N
   blocks of its pattern, to fit a short device slot.

    python3 -P bench/ab_device.py --device cuda --out OUT [--blocks N] [--prompt-len 64] [--steps 2]
        [--deadline SECONDS] [--tiny-timeout SECONDS]

Each run's stderr (the trace children's `A: ...`/`B: ...` stages) is written to OUT/NAME.log, so a
run past its time shows the stage it sat in and its stack (layer_ab.stalled).

Run it from outside the checkout (`cd /tmp`), with the package installed: the A/B's children are
`python -m bringup.core.compare.trace`, which a checkout's bringup/ folder would shadow.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

NANO = "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"


def nano_config(shared: Path, folder: Path, blocks: int | None, experts: int | None) -> Path:
    config = json.loads((shared / "models" / NANO).read_text())
    if blocks:
        config["hybrid_override_pattern"] = config["hybrid_override_pattern"][:blocks]
        config["num_hidden_layers"] = blocks
    if experts:  # only for a CPU dry run of this script
        config["n_routed_experts"] = experts
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def ab(name: str, out: Path, argv: list[str], timeout: float) -> dict:
    cmd = [sys.executable, "-P", "-m", "bringup", "ab", "--layers", *argv, "--json", "--timeout", str(int(timeout))]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30)
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as err:
        code, stdout, stderr = None, err.stdout or "", f"timed out after {timeout:.0f} s"
    wall = time.perf_counter() - start
    stderr = stderr if isinstance(stderr, str) else stderr.decode()
    (out / f"{name}.log").write_text(stderr)
    summary = {"name": name, "argv": cmd[2:], "exit": code, "wall_s": round(wall, 1),
               "stages": [ln for ln in stderr.splitlines() if ln[:3] in ("A: ", "B: ")][-4:]}
    try:
        doc = json.loads(stdout)
        (out / f"{name}.json").write_text(json.dumps(doc, indent=1))
        steps = doc["steps"]
        summary |= {"first": doc["first"], "first_state": doc["first_state"], "routing_flips": doc["routing_flips"],
                    "tolerance": doc["tolerance"],
                    "worst_per_step": [[s["step"], s["kind"], s["worst_block"], s["worst_rel_err"]] for s in steps],
                    "tokens_a": [s["token_a"] for s in steps], "tokens_b_own": [s["token_b_own"] for s in steps],
                    "max_state_err": max((e["rel_err"] for e in doc["state_errors"]), default=None)}
    except (ValueError, KeyError, TypeError):
        summary["stderr_tail"] = stderr[-3000:]
    print(json.dumps(summary), flush=True)
    return summary


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared")
    ap.add_argument("--blocks", type=int, default=None, help="the first N blocks of Nano's pattern (default: all 52)")
    ap.add_argument("--experts", type=int, default=None, help="fewer routed experts (a CPU dry run only)")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--nano-dtype", default="bfloat16")
    ap.add_argument("--deadline", type=float, default=400, help="seconds for everything")
    ap.add_argument("--skip-tiny", action="store_true")
    ap.add_argument("--tiny-timeout", type=float, default=150,
                    help="seconds for each side of the tiny run (at most half of --deadline)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    left = lambda: args.deadline - (time.perf_counter() - start)  # noqa: E731
    results = []
    if not args.skip_tiny:
        tiny = min(args.tiny_timeout, left() / 2)  # half the deadline at most: the nano run needs the rest
        if tiny < args.tiny_timeout:
            print(f"tiny: {tiny:.0f} s a side, not --tiny-timeout {args.tiny_timeout:.0f} (half of --deadline "
                  f"{args.deadline:.0f}); raise --deadline to give it more", file=sys.stderr, flush=True)
        results.append(ab("tiny-cuda-vs-cpu", args.out,
                          ["default", "--a", "device=cpu,dtype=float32,kernels=reference",
                           "--b", f"device={args.device},dtype=float32", "--steps", "4", "--prompt-len", "32"], tiny))
    if left() > 30:
        folder = nano_config(args.shared, Path("/tmp/ab-nano"), args.blocks, args.experts)
        d, t = args.device, args.nano_dtype
        results.append(ab(f"nano{args.blocks or 52}-reference-vs-fast", args.out,
                          [str(folder), "--a", f"device={d},dtype={t},kernels=reference,load_format=dummy",
                           "--b", f"device={d},dtype={t},load_format=dummy", "--steps", str(args.steps),
                           "--prompt-len", str(args.prompt_len)], max(30, left() - 10)))
    else:
        print(json.dumps({"name": "nano", "skipped": f"{left():.0f} s left of the deadline"}), flush=True)
    (args.out / "summary.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
