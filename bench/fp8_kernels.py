"""Each FP8 (W8A16) decode kernel against its bf16 counterpart at a model's real shapes, in one run.

    python bench/fp8_kernels.py [CONFIG.json] [--rows 1 2 4 8] [--forms dot mma ...] [--block 128] [--sweep]
                                [--json OUT.json]

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

Each fp8 GEMV has several forms (kernels/triton/fp8_decode_forms.py: "dot", "mma", "vec", "rows");
each row of the table times every form that can take that many rows (the device picking that form's
tiles) and the engine as its rule stands ("engine"), each with its share of the bandwidth limit and
its speed over bf16; the last lines print the rule the fastest forms give (DENSE_FORMS, MOE_FORMS),
to be copied into fp8_decode_forms.py where it differs.

The fp8 GEMVs (dense and MoE) pick their tiles per shape at the first call (kernels/triton/tile_picker.py);
after the table, each shape's candidates are listed with their time (us per call, one launch after
an L2 flush) and the one chosen, so a device run shows which tiles win and by how much. --sweep
times a wider set of tiles (SWEEP_CONFIGS in the kernels) in place of the few the engine times at
warm-up: which tiles those few should be.
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
            fields = " ".join(f"{n} {v}" for n, v in config._asdict().items() if n != "form")
            form = f"{config.form} " if hasattr(config, "form") else ""  # (GEMV configs say which)
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


def form_times(time_form, forms) -> dict[str, float]:
    """us per call of each form (the device picking that form's tiles), then the engine's rule as it stands."""
    return {f: time_form((f,)) for f in forms}


def suggested_rule(results: list[dict], kind: str, max_rows: int) -> tuple:
    """The (rows bound, forms) table the measured winners give: per row count, the forms that were
    fastest at some shape (within 3 %), in the order of how often; the engine times those at warm-up.
    The last bound is raised to `max_rows` (the GEMV's last row count), keeping what runs there."""
    by_rows: dict[int, dict[str, int]] = {}
    for r in results:
        if r["kind"] != kind or not r["forms"]:
            continue
        best = min(r["forms"].values())
        for f, us in sorted(r["forms"].items(), key=lambda t: t[1]):
            if us <= best * 1.03:
                by_rows.setdefault(r["rows"], {}).setdefault(f, 0)
                by_rows[r["rows"]][f] += 1
    table = [(m, tuple(sorted(w, key=lambda f: -w[f]))) for m, w in sorted(by_rows.items())]
    if table and table[-1][0] < max_rows:
        from bringup.kernels.triton.fp8_decode_forms import dense_runs
        last = tuple(f for f in table[-1][1] if kind == "moe" or dense_runs(f, max_rows)) or ("dot",)
        table.append((max_rows, last))
    return tuple(table)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", type=Path, default=NANO)
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--sweep", action="store_true", help="time the wider SWEEP_* tile sets, not the engine's few")
    ap.add_argument("--forms", nargs="+", help="time only these fp8 forms (default: all; each compiles its tiles)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # (each row on its own: a run cut short keeps what it measured)
    from bringup.kernels.triton import fp8_decode_forms as rule, fp8_linear as dense, fused_moe_fp8 as moe
    forms = tuple(args.forms or rule.FORMS)
    unknown = [f for f in forms if f not in rule.FORMS]
    if unknown:
        ap.error(f"unknown forms {unknown}: the forms are {', '.join(rule.FORMS)}")
    if args.sweep:
        dense.CONFIGS, moe.CONFIGS = dense.SWEEP_CONFIGS, moe.SWEEP_CONFIGS
    from bringup.kernels.reference.fp8_linear import quantize_fp8_block
    from bringup.kernels.triton.fp8_linear import fp8_linear
    from bringup.kernels.triton.fused_moe import moe_experts_shared_unsummed
    from bringup.kernels.triton.fused_moe_fp8 import moe_experts_shared_fp8_unsummed
    cfg = json.loads(args.config.read_text())
    dev, bf16, block = torch.device("cuda"), torch.bfloat16, (args.block, args.block)
    gen = torch.Generator(device=dev).manual_seed(0)
    bw = copy_bandwidth(dev)
    print(f"copy bandwidth (read + write): {bw / 1e12:.2f} TB/s; each figure: us per call, {CALLS} calls in a CUDA graph;")
    print("per fp8 form (kernels/triton/fp8_decode_forms.py): us, its share of the bandwidth limit, bf16 us / its us;"
          " 'engine': the forms the engine's rule lets the device pick from now")
    rows_out = []

    def report(kind, name, m, bf16_us, bf16_bytes, fp8_bytes, times):
        b_share = bf16_bytes / bw / (bf16_us * 1e-6)
        cells = "  ".join(f"{f} {us:.1f} {fp8_bytes / bw / (us * 1e-6):.0%} {bf16_us / us:.2f}x" for f, us in times.items())
        best = min((f for f in times if f != "engine"), key=times.get, default="engine")
        print(f"{name:<22}{m:>3} rows  bf16 {bf16_us:.1f} {b_share:.0%}  |  {cells}  |  best {best}")
        rows_out.append({"kind": kind, "layer": name, "rows": m, "bf16_us": bf16_us, "bf16_share": b_share,
                         "forms": {f: us for f, us in times.items() if f != "engine"}, "engine_us": times["engine"],
                         "fp8_bytes": fp8_bytes, "best": best})

    def dense_time(x, copies):
        def time_forms(forms):
            dense.dense_forms = (lambda rows: forms) if forms else engine_dense
            try:
                return graphed_us([lambda wq=wq, s=s: fp8_linear(x, wq, s, block) for _, wq, s in copies])
            finally:
                dense.dense_forms = engine_dense
        return {**form_times(time_forms, tuple(f for f in forms if rule.dense_runs(f, x.shape[0]))),
                "engine": time_forms(None)}

    engine_dense, engine_moe = dense.dense_forms, moe.moe_forms
    for name, (N, K) in linear_shapes(cfg).items():
        copies = []
        for _ in range(copies_beyond_l2(N * K, dev)):
            w = torch.randn(N, K, device=dev, generator=gen) * 0.02
            copies.append((w.to(bf16), *quantize_fp8_block(w, block)))
            del w
        ws = copies[0][2]
        for m in args.rows:
            x = torch.randn(m, K, device=dev, generator=gen).to(bf16)
            report("dense", name, m, graphed_us([lambda wb=wb: F.linear(x, wb) for wb, _, _ in copies]), N * K * 2,
                   N * K + ws.numel() * 4, dense_time(x, copies))
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
            fp8_calls = [lambda ids=ids, wts=wts: moe_experts_shared_fp8_unsummed(
                x, wts, ids, q8[0][0], q8[0][1], q8[1][0], q8[1][1], q8[2][0], q8[2][1], q8[3][0], q8[3][1],
                "relu2", block) for ids, wts in routes]

            def time_moe(forms):
                moe.moe_forms = (lambda tokens: forms) if forms else engine_moe
                try:
                    return graphed_us(fp8_calls)
                finally:
                    moe.moe_forms = engine_moe
            if m > moe.GEMV_MAX_TOKENS:  # (past the GEMV: the grouped GEMM, no forms to choose)
                times = {"grouped": time_moe(None), "engine": time_moe(None)}
            else:
                times = {**form_times(time_moe, forms), "engine": time_moe(None)}
            report("moe", "moe + shared expert", m,
                   graphed_us([lambda ids=ids, wts=wts: moe_experts_shared_unsummed(x, wts, ids, *b16, "relu2")
                               for ids, wts in routes]), read * 2, read, times)
    print_tile_times(dense.PICKER, ("N", "K", "rows", "", "", "", "forms"))
    print_tile_times(moe.PICKER, ("N", "K", "tokens", "top-k", "shared slices", "along K", "", "", "", "forms"))
    print(f"\npicking tiles took {dense.PICKER.seconds + moe.PICKER.seconds:.1f} s (compiles included)")
    dense_rule = suggested_rule(rows_out, "dense", dense.GEMV_MAX_ROWS)
    moe_rule = suggested_rule([r for r in rows_out if "grouped" not in r["forms"]], "moe", moe.GEMV_MAX_TOKENS)
    print("\nthe rule the fastest forms give (kernels/triton/fp8_decode_forms.py; now in force in brackets):")
    print(f"  DENSE_FORMS = {dense_rule!r}  [{rule.table('dense')!r}]")
    print(f"  MOE_FORMS = {moe_rule!r}  [{rule.table('moe')!r}]")
    print(f"  to try it in a whole step: {rule.ENV}='{rule.format_table('dense', dense_rule)};"
          f"{rule.format_table('moe', moe_rule)}' python bench/quantized.py CONFIG.json")
    if args.json:
        args.json.write_text(json.dumps({"bandwidth": bw, "rows": rows_out, "rule": {"dense": dense_rule, "moe": moe_rule},
                                         "tiles": tile_json(dense.PICKER) + tile_json(moe.PICKER)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
