"""Jamba's Mamba (v1) prompt scan: the chunked op (kernels/reference/selective_scan_varlen) next to
the one-token-at-a-time recurrence (selective_scan_stepwise, its test oracle) on the same inputs, in
the same run. Decays as Jamba initialises them (A = -(1..N), dt in [1e-3, 0.1]).

    python bench/selective_scan.py [--device cpu] [--threads 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from bringup.kernels.reference.selective_scan import selective_scan_stepwise, selective_scan_varlen

# (channels, d_state, prompt lengths): a tiny test model, a small model, Jamba-1.5-Mini's width (8192 x 16).
SHAPES = [(64, 16, [512]), (64, 16, [200, 100, 212]), (1024, 16, [512]), (8192, 16, [512])]


def inputs(width: int, n: int, lengths: list[int], device: str):
    g = torch.Generator().manual_seed(0)
    T = sum(lengths)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    dt0 = torch.exp(torch.empty(width).uniform_(math.log(1e-3), math.log(0.1), generator=g))
    args = dict(x=r(T, width), dt=0.3 * r(T, width), A=-torch.arange(1, n + 1).float().repeat(width, 1), B=r(T, n),
                C=r(T, n), D=r(width), z=r(T, width), dt_bias=dt0 + torch.log(-torch.expm1(-dt0)))
    starts = [0]
    for length in lengths:
        starts.append(starts[-1] + length)
    return {k: v.to(device) for k, v in args.items()}, starts


def best_ms(fn, repeats: int, device: str) -> float:
    times = []
    for _ in range(repeats):
        if device != "cpu":
            torch.accelerator.synchronize()
        t = time.perf_counter()
        fn()
        if device != "cpu":
            torch.accelerator.synchronize()
        times.append(time.perf_counter() - t)
    return 1e3 * min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    print(f"{'channels':>8} {'d_state':>7} {'prompts':>14}  {'chunked ms':>10} {'stepwise ms':>11}  speed-up  max rel diff")
    for width, n, lengths in SHAPES:
        args, starts = inputs(width, n, lengths, a.device)

        def run(fn):
            return fn(args["x"], args["dt"], args["A"], args["B"], args["C"], starts, args["D"], args["z"],
                      args["dt_bias"])

        (y1, s1), (y0, s0) = run(selective_scan_varlen), run(selective_scan_stepwise)
        diff = max(float((y1 - y0).abs().max() / y0.abs().max()), float((s1 - s0).abs().max() / s0.abs().max()))
        ours = best_ms(lambda: run(selective_scan_varlen), a.repeats, a.device)
        base = best_ms(lambda: run(selective_scan_stepwise), a.repeats, a.device)
        print(f"{width:>8} {n:>7} {'+'.join(map(str, lengths)):>14}  {ours:>10.1f} {base:>11.1f}  {base / ours:>7.2f}x  {diff:.1e}")


if __name__ == "__main__":
    main()
