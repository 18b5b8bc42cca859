"""Kernels per decode step, counted on a CPU with the GPU's op set (core/bench/launch_count.py):

    TRITON_INTERPRET=1 python bench/launch_count.py [CONFIG.json ...] [--top 12]

Each config runs at small widths with its layer list kept (core/bench/launch_count.small_widths),
dummy weights in bfloat16 (as the GPU bench), one request of a 16-token prompt as bench/families.py profiles it; the count
is over one decode step, and per 50 blocks as families.py scales it. --top prints the most launched
kernels. Without configs: Qwen3-8B, gemma-3-1b-it, gpt-oss-20b from ../shared/models.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT = ["Qwen__Qwen3-8B", "google__gemma-3-1b-it", "openai__gpt-oss-20b"]


def count(path: Path, dtype: str) -> dict:
    from bringup.core.bench.launch_count import count_config, small_widths

    return {"model": path.stem, **count_config(small_widths(json.loads(path.read_text())), dtype=dtype)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--dtype", default="bfloat16", help="the GPU bench's (the references take more kernels in bf16)")
    args = ap.parse_args()
    from bringup.core.bench.launch_count import use_gpu_ops_on_cpu

    try:
        use_gpu_ops_on_cpu()
    except (RuntimeError, ImportError) as err:
        print(f"launch_count: {err}", file=sys.stderr)
        return 2
    paths = [Path(p) for p in args.configs] or [REPO.parent / "shared" / "models" / f"{n}.json" for n in DEFAULT]
    for path in paths:
        row = count(path, args.dtype)
        print(f"{row['model']}: {row['kernels_per_step']:.0f} kernels per decode step over {row['blocks']} blocks "
              f"({row['kernels_per_50_blocks']:.0f} per 50 blocks)", flush=True)
        for name, n in row["names"].most_common(args.top):
            print(f"  {n:>5}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
