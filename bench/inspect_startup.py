"""`bringup inspect` wall time next to a bare interpreter start (`python -c pass`).

Each run is a fresh process; the figure is the median of several runs, for the default model
(catalogue, offline) and for a config file on disk. Aim: inspect at most 3x a bare start.

With --generic it also times a model_type without a family module (MiMo-V2-Flash, read through
transformers and a meta-device build) next to transformers counting the same config's parameters
itself on the meta device: the generic path should cost about what transformers costs.

    python bench/inspect_startup.py [--runs 9] [--generic] [--json]
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


GENERIC_SNIPPET = """
import json, sys, torch, transformers
cfg = json.load(open(sys.argv[1])); mt = cfg.pop("model_type")
with torch.device("meta"):
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(mt, **cfg))
print(sum(p.numel() for p in model.parameters()))
"""


def _generic_cases(py: str) -> dict[str, list[str]]:
    import tempfile

    # MiMo-V2-Flash at full size: transformers' defaults are its shapes.
    path = Path(tempfile.mkdtemp(prefix="bringup-bench-")) / "config.json"
    path.write_text(json.dumps({"model_type": "mimo_v2_flash"}))
    return {
        "transformers meta-device count (mimo_v2_flash)": [py, "-c", GENERIC_SNIPPET, str(path)],
        "bringup inspect <mimo_v2_flash> (generic path)": [py, "-m", "bringup", "inspect", str(path)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--generic", action="store_true", help="also time the generic (transformers) path")
    args = parser.parse_args()
    py = sys.executable
    cases = {"python -c pass": [py, "-c", "pass"]}
    cases["bringup inspect <catalogue default> --json"] = [py, "-m", "bringup", "inspect", "NVIDIA-Nemotron-3-Nano-30B-A3B", "--json"]
    cases["bringup inspect <catalogue default> (text)"] = [py, "-m", "bringup", "inspect", "NVIDIA-Nemotron-3-Nano-30B-A3B"]
    if SHARED_FILE.is_file():
        cases["bringup inspect <56B config.json> --pp 4"] = [py, "-m", "bringup", "inspect", str(SHARED_FILE), "--pp", "4"]
    if args.generic:
        cases.update(_generic_cases(py))
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
