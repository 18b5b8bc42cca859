"""The CPU's MoE forms side by side at decode widths (kernels/cpu/moe.py picks by these figures).

Per MoE layer of the NemotronH miniature's shape (8 experts of 128, top-2, H 256), weights laid
out as the CPU engine lays them (cpu_linears.py) and evicted from the cache every few layers as a
whole decode step evicts them: "sorted" (each expert on its rows) against "dense" (every expert:
two products over oneDNN-packed copies of the stacks, as the engine's parameters get them, from 3
tokens) and "dense bmm" (the same on plain tensors: two bmm), and, for one or two tokens, "each"
(each token's experts one by one). One thread; prints microseconds per layer, the median of 7 runs.

    .venv/bin/python bench/cpu_moe_forms.py [--tokens 1,2,4,8,16,32,48,64]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    from bringup.kernels.cpu.moe import moe_experts, moe_form

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="1,2,4,8,16,32,48,64")
    args = ap.parse_args()
    torch.set_num_threads(1)
    E, I, H, k, layers = 8, 128, 256, 2, 23

    def cpu_layout(t):
        return (t * 0.05).transpose(-1, -2).contiguous().transpose(-1, -2)

    ups = [torch.nn.Parameter(cpu_layout(torch.randn(E, I, H)), requires_grad=False) for _ in range(layers)]
    downs = [torch.nn.Parameter(cpu_layout(torch.randn(E, H, I)), requires_grad=False) for _ in range(layers)]
    evict = torch.randn(16 * 1024 * 1024)  # 64 MB, twice the L3 of the machine measured
    print(f"{'tokens':>6}  {'sorted us':>9}  {'dense us':>8}  {'dense bmm us':>12}  {'each us':>9}  picks")
    for T in (int(t) for t in args.tokens.split(",")):
        xs = [torch.randn(T, H) for _ in range(layers)]
        ids = [torch.stack([torch.randperm(E)[:k] for _ in range(T)]) for _ in range(layers)]
        ws = [torch.rand(T, k) for _ in range(layers)]
        per_form = {}
        for form in ("sorted", "dense", "dense bmm", "each") if T <= 2 else ("sorted", "dense", "dense bmm"):
            runs = []
            for _ in range(7):
                total = 0.0
                for i in range(layers):
                    if i % 4 == 0:
                        evict.add_(1)
                    up, down = (ups[i].data, downs[i].data) if form == "dense bmm" else (ups[i], downs[i])
                    start = time.perf_counter()
                    moe_experts(xs[i], ws[i], ids[i], up, down, None, "relu2", strategy=form.split()[0])
                    total += time.perf_counter() - start
                runs.append(total / layers * 1e6)
            per_form[form] = statistics.median(runs)
        each = f"{per_form['each']:>9.0f}" if "each" in per_form else f"{'':>9}"
        picks = moe_form(T, k, E, torch.float32)
        print(f"{T:>6}  {per_form['sorted']:>9.0f}  {per_form['dense']:>8.0f}  {per_form['dense bmm']:>12.0f}  {each}  {picks}")


if __name__ == "__main__":
    main()
