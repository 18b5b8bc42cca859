#!/usr/bin/env python3
"""How Diagnose scales: a 1 MB log against a 100 MB one, and 1k findings against 100k, in one run.

    python bench/diagnose_scale.py            # prints seconds and the growth ratio next to the size ratio
    python bench/diagnose_scale.py --quick    # 1 MB / 10 MB and 1k / 10k (a smoke run)

Linear growth reads as a time ratio close to the size ratio. Two paths are timed: diagnose() on
the whole text (the parser and the general reader: 1 MB against 10 MB, linear), and `bringup diagnose
FILE` as a user runs it on 1 MB and 100 MB files (the reader's 8 MB cap keeps the head and tail of a
bigger file, so the time stops growing and the note says what was skipped).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHATTER = ("[2026-07-17 10:00:{s:02d} TP0] Decode batch. #running-req: 12, #token: 48210, token usage: 0.31, "
           "gen throughput (token/s): 1402.51, #queue-req: 0\n")
FAILURE = ("[2026-07-17 10:01:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
           '  File "/opt/sglang/python/sglang/srt/layers/attention/triton_backend.py", line 91, in __init__\n'
           "    self.v_head_dim = model_runner.token_to_kv_pool.get_value_buffer(0).shape[-1]\n"
           "ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])\n")


def chatter_log(size: int) -> str:
    line = CHATTER.format(s=7)
    return line * (size // len(line)) + FAILURE


def findings_log(n: int) -> str:
    """n distinct layer-index failures: every one a finding of its own (the worst case for merging)."""
    return "".join(f"ValueError: layer_id={i} not in full attention layers: dict_keys([5, 12, 19])\n" for i in range(n))


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    """The best of `repeat` runs: the machine is shared, and the least disturbed run is the cost."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    from bringup.core.diagnosis import diagnose

    small_mb, big_mb = (1, 10) if args.quick else (1, 100)
    few, many = (1_000, 10_000) if args.quick else (1_000, 100_000)
    rows = []
    for mb in (small_mb, small_mb * 10):  # the parser itself, on text in memory (no cap)
        text = chatter_log(mb * 1024 * 1024)
        seconds, result = timed(lambda: diagnose(text), repeat=3)
        assert not result.ok and result.findings[0].code == "LAYER_NOT_IN_FULL_ATTENTION"
        rows.append((f"diagnose() on a {mb} MB log", mb, seconds, len(result.findings)))
    for n in (few, many):
        text = findings_log(n)
        seconds, result = timed(lambda: diagnose(text))
        rows.append((f"diagnose() with {n:,} findings", n, seconds, len(result.findings)))
    with tempfile.TemporaryDirectory() as tmp:
        for mb in (small_mb, big_mb):
            path = Path(tmp) / f"{mb}.log"
            path.write_text(chatter_log(mb * 1024 * 1024))
            cmd = [sys.executable, "-m", "bringup", "diagnose", str(path), "--json"]
            seconds, proc = timed(lambda: subprocess.run(cmd, capture_output=True, text=True), repeat=2)
            assert proc.returncode == 1, proc.stderr
            rows.append((f"bringup diagnose on a {mb} MB file", mb, seconds, 0))
    print(f"{'case':<44}{'seconds':>10}{'findings':>10}")
    for name, _, seconds, n in rows:
        print(f"{name:<44}{seconds:>10.2f}{n:>10,}")
    print()
    for a, b, what in ((0, 1, "log size (diagnose)"), (2, 3, "findings"), (4, 5, "file size (bringup diagnose, capped)")):
        size_ratio = rows[b][1] / rows[a][1]
        time_ratio = rows[b][2] / max(rows[a][2], 1e-9)
        print(f"{what}: x{size_ratio:,.0f} input -> x{time_ratio:,.1f} time "
              f"({'linear or better' if time_ratio <= size_ratio * 1.5 else 'SUPERLINEAR'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
