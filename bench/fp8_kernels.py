"""Each FP8 (W8A16) decode kernel against its bf16 counterpart at a model's real shapes, in one run.

    python bench/fp8_kernels.py [CONFIG.json] [--rows 1 2 4 8] [--block 128] [--sweep] [--json OUT.json]

CONFIG defaults to Nemotron-3-Nano-30B-A3B's (../shared/models). Per layer shape of a decode step
(Mamba in/out projections, attention q/k/v and o, the MoE layer with its shared expert): the fp8
kernel (`fp8_linear`, `moe_experts_shared_fp8_unsummed`) and the bf16 one the engine runs for the
same layer (torch's linear, `moe_experts_shared_unsummed`), each timed as 50 calls replayed from a
CUDA graph (so launch gaps count as they do in a graphed decode step), in microseconds per call,
with the bytes it must read over the copy bandwidth measured here: the share of the bandwidth limit.
The calls cycle over enough copies of the weights (or, for the MoE, sets of routed experts) to read
twice the L2 cache, so that no call finds its weights cached by the one before: a decode step reads
each layer's weights once, from memory. Where the whole model's FP8 decode loses to bf16
(bench/quantized.py), this says which kernel.

The fp8 GEMVs (dense and MoE) pick their tiles per shape at the first call (kernels/triton/tile_picker.py);
after the table, each shape's candidates are listed with their time (us per call, one launch after
an L2 flush) and the one chosen, so a device run shows which tiles win and by how much. --sweep
times a wider set of tiles (SWEEP_* in the kernels) in place of the few the engine times at warm-up:
which tiles those few should be.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nano_full import copy_bandwidth  # noqa: E402

NANO = Path(__file__).resolve().parents[1].parent / "shared" / "models" / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"
CALLS = 50


def graphed_us(fns) -> float:
    """Microseconds per call, CALLS calls (cycling over `fns`) captured in one CUDA graph, median of 5 replays."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            for fn in fns:
                fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(CALLS):
            fns[i % len(fns)]()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / CALLS)
    return sorted(times)[2]


def copies_beyond_l2(nbytes: int, dev) -> int:
    """How many copies of `nbytes` of weights read twice the L2 cache."""
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    return max(1, -(-2 * l2 // max(1, nbytes)))


def print_tile_times(picker, key_names) -> None:
    """Each timed shape's candidate tiles, fastest first, the chosen one marked."""
    if not picker.timings:
        return
    print(f"\n{picker.name} tiles per shape (us per call after an L2 flush; * chosen):")
    for full, times in picker.timings.items():
        chosen = picker.chosen[full]
        print("  " + " ".join(f"{n}={v}" for n, v in zip(key_names, full[1]) if n))
        for config, us in sorted(times, key=lambda t: t[1]):
            fields = " ".join(f"{n} {v}" for n, v in config._asdict().items() if n != "dot")
            form = ("dot " if config.dot else "vec ") if hasattr(config, "dot") else ""  # (GEMV configs say which)
            print(f"    {'*' if config == chosen else ' '} {form}{fields}: {us:.1f}")
        for config, why in picker.failures.get(full, []):
            print(f"    ! {config}: did not run: {why[:300]}")


def tile_json(picker) -> list[dict]:
    return [{"picker": picker.name, "key": [str(v) for v in full[1]], "chosen": picker.chosen[full]._asdict(),
             "times": [{**c._asdict(), "us": us} for c, us in times],
             "failed": [{**c._asdict(), "why": why} for c, why in picker.failures.get(full, [])]}
            for full, times in picker.timings.items()]


def linear_shapes(cfg: dict) -> dict[str, tuple[int, int]]:
    """(N, K) of the dense linears one decode step runs, by name."""
    H = cfg["hidden_size"]
    inner = cfg["mamba_num_heads"] * cfg["mamba_head_dim"]
    groups_state = 2 * cfg["n_groups"] * cfg["ssm_state_size"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    return {"mamba in_proj": (2 * inner + groups_state + cfg["mamba_num_heads"], H), "mamba out_proj": (H, inner),
            "attention qkv": (q + 2 * kv, H), "attention o": (H, q)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", type=Path, default=NANO)
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--sweep", action="store_true", help="time the wider SWEEP_* tile sets, not the engine's few")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from bringup.kernels.triton import fp8_linear as dense, fused_moe_fp8 as moe
    if args.sweep:
        dense.DOT_CONFIGS, dense.ONE_ROW_CONFIGS = dense.SWEEP_DOT_CONFIGS, dense.SWEEP_ONE_ROW_CONFIGS
        moe.GEMV_CONFIGS = moe.SWEEP_CONFIGS
    from bringup.kernels.reference.fp8_linear import quantize_fp8_block
    from bringup.kernels.triton.fp8_linear import fp8_linear
    from bringup.kernels.triton.fused_moe import moe_experts_shared_unsummed
    from bringup.kernels.triton.fused_moe_fp8 import moe_experts_shared_fp8_unsummed
    cfg = json.loads(args.config.read_text())
    dev, bf16, block = torch.device("cuda"), torch.bfloat16, (args.block, args.block)
    gen = torch.Generator(device=dev).manual_seed(0)
    bw = copy_bandwidth(dev)
    print(f"copy bandwidth (read + write): {bw / 1e12:.2f} TB/s; each figure: us per call, {CALLS} calls in a CUDA graph")
    print(f"{'layer':<22}{'rows':>5}{'bf16 us':>10}{'share':>8}{'fp8 us':>10}{'share':>8}{'fp8/bf16':>10}")
    rows_out = []

    def report(name, m, bf16_us, bf16_bytes, fp8_us, fp8_bytes):
        b_share, f_share = bf16_bytes / bw / (bf16_us * 1e-6), fp8_bytes / bw / (fp8_us * 1e-6)
        print(f"{name:<22}{m:>5}{bf16_us:>10.1f}{b_share:>8.0%}{fp8_us:>10.1f}{f_share:>8.0%}{bf16_us / fp8_us:>9.2f}x")
        rows_out.append({"layer": name, "rows": m, "bf16_us": bf16_us, "bf16_share": b_share, "fp8_us": fp8_us,
                         "fp8_share": f_share})

    for name, (N, K) in linear_shapes(cfg).items():
        copies = []
        for _ in range(copies_beyond_l2(N * K, dev)):
            w = torch.randn(N, K, device=dev, generator=gen) * 0.02
            copies.append((w.to(bf16), *quantize_fp8_block(w, block)))
            del w
        ws = copies[0][2]
        for m in args.rows:
            x = torch.randn(m, K, device=dev, generator=gen).to(bf16)
            report(name, m, graphed_us([lambda wb=wb: F.linear(x, wb) for wb, _, _ in copies]), N * K * 2,
                   graphed_us([lambda wq=wq, s=s: fp8_linear(x, wq, s, block) for _, wq, s in copies]),
                   N * K + ws.numel() * 4)
        del copies
    if cfg.get("n_routed_experts"):
        E, I, H = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["hidden_size"]
        k, S_I = cfg["num_experts_per_tok"], cfg["moe_shared_expert_intermediate_size"]
        up, down = torch.randn(E, I, H, device=dev, generator=gen) * 0.05, torch.randn(E, H, I, device=dev, generator=gen) * 0.05
        su, sd = torch.randn(S_I, H, device=dev, generator=gen) * 0.05, torch.randn(H, S_I, device=dev, generator=gen) * 0.05
        q8 = [quantize_fp8_block(t, block) for t in (up, down, su, sd)]
        b16 = [t.to(bf16) for t in (up, down, su, sd)]
        del up, down, su, sd
        for m in args.rows:
            x = torch.randn(m, H, device=dev, generator=gen).to(bf16)
            # distinct experts per call, so that the calls read other experts than the call before
            # (and as many distinct ones per call as a step of m tokens that route apart)
            routes = []
            for _ in range(4):
                ids = torch.randperm(E, device=dev, generator=gen)[:m * k].reshape(m, k) if m * k <= E else \
                    torch.stack([torch.randperm(E, device=dev, generator=gen)[:k] for _ in range(m)])
                routes.append((ids, torch.rand(m, k, device=dev, generator=gen)))
            read = (min(E, m * k) * 2 * I * H + 2 * S_I * H)  # weights one step reads (distinct experts + shared)
            report("moe + shared expert", m,
                   graphed_us([lambda ids=ids, wts=wts: moe_experts_shared_unsummed(x, wts, ids, *b16, "relu2")
                               for ids, wts in routes]), read * 2,
                   graphed_us([lambda ids=ids, wts=wts: moe_experts_shared_fp8_unsummed(
                       x, wts, ids, q8[0][0], q8[0][1], q8[1][0], q8[1][1], q8[2][0], q8[2][1], q8[3][0], q8[3][1],
                       "relu2", block) for ids, wts in routes]), read)
    print_tile_times(dense.PICKER, ("N", "K", "one row", "", "", ""))
    print_tile_times(moe.PICKER, ("N", "K", "tokens", "top-k", "shared slices", "along K", "", "", ""))
    print(f"\npicking tiles took {dense.PICKER.seconds + moe.PICKER.seconds:.1f} s (compiles included)")
    if args.json:
        args.json.write_text(json.dumps({"bandwidth": bw, "rows": rows_out,
                                         "tiles": tile_json(dense.PICKER) + tile_json(moe.PICKER)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
