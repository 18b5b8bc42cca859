"""`bringup inspect` wall time next to a bare interpreter start (`python -c pass`).

Each run is a fresh process; the figure is the median of several runs, for the default model
(catalogue, offline) and for a config file on disk. Aim: inspect at most 3x a bare start.

    python bench/inspect_startup.py [--runs 9] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_FILE = REPO.parent / "shared" / "models" / "nvidia__Nemotron-H-56B-Base-8K.json"


def _env() -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    # Measure what an installed copy does: bytecode cached after the first run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def once(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO, env=_env())
    return time.perf_counter() - t0


def medians(cases: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Round-robin over the cases, so that load from other processes hits them all alike."""
    for cmd in cases.values():
        once(cmd)  # warm the file cache and write the bytecode
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, cmd in cases.items():
            times[name].append(once(cmd))
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    py = sys.executable
    cases = {"python -c pass": [py, "-c", "pass"]}
    cases["bringup inspect <catalogue default> --json"] = [py, "-m", "bringup", "inspect", "NVIDIA-Nemotron-3-Nano-30B-A3B", "--json"]
    cases["bringup inspect <catalogue default> (text)"] = [py, "-m", "bringup", "inspect", "NVIDIA-Nemotron-3-Nano-30B-A3B"]
    if SHARED_FILE.is_file():
        cases["bringup inspect <56B config.json> --pp 4"] = [py, "-m", "bringup", "inspect", str(SHARED_FILE), "--pp", "4"]
    results = medians(cases, args.runs)
    base = results["python -c pass"]
    if args.json:
        print(json.dumps({"runs": args.runs, "seconds": results, "ratio": {k: v / base for k, v in results.items()}}, indent=2))
        return 0
    print(f"median of {args.runs} runs each")
    for name, seconds in results.items():
        print(f"  {name:<44} {seconds * 1000:7.1f} ms   {seconds / base:4.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
