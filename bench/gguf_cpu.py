"""A GGUF model on the CPU with its blocks kept (`--dtype auto`) against the same file dequantised to
float32 at load (`--dtype float32`, what every GGUF run did before): resident memory and batch-1
decode tok/s, side by side in one run.

    python bench/gguf_cpu.py [FILE.gguf | smollm2] [--rounds 2] [--tokens 48] [--cpu-compile off] [--cpu-threads 1]

Each measurement is its own child process (resident memory is a process's), the two kinds taking
turns `--rounds` times so that load from the machine's other users falls on both; medians are
printed. Per child: RSS once the engine is up (after its start-up, before any request), the peak
RSS, and the decode tok/s of one greedy request (32 prompt tokens, `--tokens` new ones, the steps
after the first timed). The weights each engine says it runs (`/server_info`'s `weights`) are
printed beside the figures. Both kinds run the same number of CPU threads (an engine left to choose
counts the cores idle at its start, so on a shared machine one child could get 2 and the next 1).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, resource, sys, time
from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams

def rss():
    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')

path, dtype, tokens, compile_, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
e = Engine(EngineConfig(path, device='cpu', dtype=dtype, max_running_requests=1, context_length=1024,
                        cpu_compile={'on': True, 'off': False}.get(compile_), cpu_threads=threads), log=lambda m: None)
ready = rss()
e.add_request(list(range(10, 42)), SamplingParams(max_new_tokens=tokens, temperature=0.0, ignore_eos=True),
              detokenize=False)
times = []
while e.has_unfinished():
    t = time.perf_counter(); e.step(); times.append(time.perf_counter() - t)
decode = times[1:]
print(json.dumps({"rss_ready": ready, "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "decode_tok_s": len(decode) / sum(decode), "weights": e.server_info()["weights"],
                  "weights_bytes": e.weights_bytes, "packed_bytes": e.packed_weights_bytes_now()}))
"""


def measure(path: str, dtype: str, tokens: int, cpu_compile: str, threads: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, path, dtype, str(tokens), cpu_compile, str(threads)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"the {dtype} child failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", nargs="?", default="smollm2", help="a .gguf file, or a packaged model name (bringup models)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--cpu-compile", default="off", choices=["auto", "on", "off"],
                    help="the engines' CPU compile (default off: a compile takes minutes on a small machine)")
    ap.add_argument("--cpu-threads", type=int, default=1, help="torch threads of both engines (default 1)")
    args = ap.parse_args()
    path = args.source
    if not path.lower().endswith(".gguf"):
        from bringup.core.sources.packaged import packaged_checkpoint

        path = str(packaged_checkpoint(path))
    runs = {"float32": [], "auto": []}
    for _ in range(args.rounds):
        for dtype in ("float32", "auto"):
            runs[dtype].append(measure(path, dtype, args.tokens, args.cpu_compile, args.cpu_threads))
    mib = 2**20
    print(f"{path} (CPU, {args.cpu_threads} thread(s), cpu-compile {args.cpu_compile}, medians of {args.rounds})")
    print(f"{'--dtype':<8} {'weights running':<52} {'weights':>8} {'RSS ready':>10} {'RSS peak':>9} {'decode tok/s':>13}")
    rows = {}
    for dtype, rs in runs.items():
        w = rs[0]["weights"]
        label = (w["scheme"] + (f", {w['products_dtype']} products" if w.get("products_dtype") else "")
                 + (f" (from {w['dequantised_from']})" if w["dequantised_from"] else ""))
        row = {k: statistics.median(r[k] for r in rs) for k in ("rss_ready", "rss_peak", "decode_tok_s")}
        row["weights"] = (rs[0]["weights_bytes"] + rs[0]["packed_bytes"]) / mib
        rows[dtype] = row
        print(f"{dtype:<8} {label[:52]:<52} {row['weights']:7.0f}M {row['rss_ready'] / mib:9.0f}M "
              f"{row['rss_peak'] / mib:8.0f}M {row['decode_tok_s']:13.1f}")
    a, f = rows["auto"], rows["float32"]
    kept = not runs["auto"][0]["weights"]["dequantised_from"]  # else auto dequantised too: say so, not "kept"
    print(f"{'blocks kept' if kept else 'auto (dequantised as well)'} / dequantised: "
          f"RSS {a['rss_ready'] / f['rss_ready']:.2f}x, peak {a['rss_peak'] / f['rss_peak']:.2f}x, "
          f"decode {a['decode_tok_s'] / f['decode_tok_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
