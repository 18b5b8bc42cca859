"""Every family the engine runs, at its real size, on one GPU with dummy weights, in one run: decode
speed against the bandwidth limit, kernels per step, prefill, time to ready, and transformers.

    python bench/families.py [CONFIG.json ...] [--batches 1,32] [--budget-s 240] [--gate-up auto|fused|apart]
        [--out results.json] [--profile [--profile-top 10]] [--moe-forms timed|estimate]
        [--dense-gemv off|o_proj|all]

Without configs: every config under ../shared/models whose model_type the engine runs, smallest first
(configs given run in the order given)
(a model whose bf16 weights do not fit the device is listed as such, not run). Per model (bf16,
`--load-format dummy`, started as `bringup serve` starts it, decode graphs and warm-up included):
- time to ready: Engine(...) from start to return (weights drawn on the device, warm-up, graph capture);
- per batch B: decode ms/step (median over the steps where all B requests decode), the bytes one such
  step must move (core/bench/step_bytes.py: weights but the routed experts, the experts B tokens pick,
  state read and written, KV over the context), that over the copy bandwidth measured here = the
  bandwidth limit, and the share of it the engine reaches;
- kernels per decode step at batch 1 (torch.profiler over eager steps: what the graphs replay), and
  that scaled to 50 blocks (the goal: <= 450 for a 50-block model);
- prefill tok/s: prompt tokens over the time of the steps that carried them, in the batch-B run;
- transformers `generate` at batch 1 on the same weights (bench/nano_full.py's twin), where the
  model is small enough to hold twice (`--hf-max-params`) and transformers builds it.
- with --profile, per batch B: the eager decode step under torch.profiler, its kernel time against its
  wall time, the graph of bucket B replayed alone, and the top kernels and modules by GPU time
  (bench/step_profile.py says what is measured how).
Results go to `--out` after every model, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nano_full import copy_bandwidth, profile_decode, run_engine_batch, run_hf  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED_MODELS = REPO.parent / "shared" / "models"


def engine_configs(paths: list[str]) -> list[tuple[Path, dict, int]]:
    """(path, config, parameters) of each config the engine runs, smallest first."""
    from bringup.core.engine.loader import decode_special_floats
    from bringup.core.engine.models import decoder_config, supported_model_types
    from bringup.core.families import build_layer_map
    from bringup.core.sources.config_file import read_config_file

    found = [Path(p) for p in paths] or sorted(SHARED_MODELS.glob("*.json"))
    out = []
    for path in found:
        config = decode_special_floats(read_config_file(path))
        if config.get("model_type") not in supported_model_types():
            print(f"{path.stem}: model_type {config.get('model_type')!r} is not one the engine runs; skipped", flush=True)
            continue
        out.append((path, config, build_layer_map(decoder_config(config)).params_total))
    return out if paths else sorted(out, key=lambda item: item[2])  # the order given, else smallest first


def bench_model(path: Path, config: dict, params: int, args, bw: float, device, deadline: float) -> dict:
    from bringup.core.bench.step_bytes import step_bytes
    from bringup.core.engine import device as devices
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine

    row: dict = {"model": path.stem, "params": params}
    max_batch = max(args.batches)
    t = time.perf_counter()
    engine = Engine(EngineConfig(str(path), device=DEVICE, dtype="bfloat16", load_format="dummy",
                                 max_running_requests=max_batch, context_length=args.context,
                                 mem_fraction=args.mem_fraction),
                    log=lambda m: print(f"  [{path.stem}] {m}", flush=True))
    row["ready_s"] = time.perf_counter() - t
    info = engine.server_info()
    row.update(architecture=info["architecture"], decode_graphs=info["decode_graphs"],
               kernels={k: v for k, v in engine.model.ops.implementations.items() if v != "reference"})
    print(f"{path.stem}: ready in {row['ready_s']:.1f} s ({params / 1e9:.2f} B params, graphs {info['decode_graphs']})",
          flush=True)
    vocab = int(engine.vocab_size)
    work = None
    for B in args.batches:
        if time.perf_counter() > deadline:
            print(f"  batch {B}: skipped (time budget)", flush=True)
            continue
        run_engine_batch(engine, min(B, 2), 16, 4, vocab, seed=99)  # new shapes compile here, not in the timing
        run = run_engine_batch(engine, B, args.in_len, args.out_len, vocab, seed=B)
        if B == 1:
            work = run["work"]
        sb = step_bytes(engine.model, B, args.in_len + args.out_len // 2)
        limit_ms = sb["total"] / bw * 1e3
        row[f"b{B}"] = {
            "decode_ms": run["decode_ms_step"], "limit_ms": limit_ms, "share": limit_ms / run["decode_ms_step"],
            "gb_per_step": sb["total"] / 1e9, "experts_touched": sb["experts_touched"], "tok_s": run["tok_s"],
            "prefill_tok_s": run["prefill_tokens"] / max(run["prefill_seconds"], 1e-9)}
        print(f"  batch {B:>3}: decode {run['decode_ms_step']:.2f} ms/step, limit {limit_ms:.2f} ms "
              f"({sb['total'] / 1e9:.2f} GB/step) = {row[f'b{B}']['share']:.0%}; prefill "
              f"{row[f'b{B}']['prefill_tok_s']:,.0f} tok/s; overall {run['tok_s']:.0f} tok/s", flush=True)
        if args.profile:
            from step_profile import describe, profile_decode_step

            row[f"b{B}"]["profile"] = prof = profile_decode_step(engine, B)
            print(describe(prof, run["decode_ms_step"], args.profile_top), flush=True)
    if time.perf_counter() < deadline:
        from bringup.core.engine.sampling import SamplingParams

        engine.add_request([5] * 16, SamplingParams(max_new_tokens=8, temperature=0.0, ignore_eos=True), detokenize=False)
        engine.step()  # the prompt in: the profiled steps decode only
        row["kernels_per_step"], row["busy_eager"], row["top_kernels"] = profile_decode(engine)
        row["blocks"] = len(engine.layer_map.layers)
        row["kernels_per_50_blocks"] = row["kernels_per_step"] * 50 / max(1, row["blocks"])
        while engine.has_unfinished():
            engine.step()
        print(f"  kernels per decode step (batch 1): {row['kernels_per_step']:.0f} over {row['blocks']} blocks "
              f"({row['kernels_per_50_blocks']:.0f} per 50 blocks)", flush=True)
        for name, per_step in row["top_kernels"].items():
            print(f"    {per_step:6.1f}  {name}")
    model, model_config = engine.model, engine.config
    del engine
    gc.collect()
    devices.empty_cache(device)
    if work is not None and params <= args.hf_max_params and time.perf_counter() < deadline:
        try:
            from bringup.core.bench.hf_twin import transformers_twin

            twin = transformers_twin(model, model_config, device, torch.bfloat16)
            row["hf_b1"] = run_hf(twin, work, 1, args.hf_new_tokens, int(model_config.get("pad_token_id") or 0), device)
            print(f"  transformers batch 1: {row['hf_b1']['hf_tok_s']:.1f} tok/s "
                  f"(engine decode {1e3 / row['b1']['decode_ms']:.1f} tok/s)", flush=True)
            del twin
        except Exception as err:  # noqa: BLE001 - the engine's figures stand without the baseline
            row["hf_b1"] = {"error": f"{type(err).__name__}: {str(err)[:200]}"}
            print(f"  transformers: {row['hf_b1']['error']}", flush=True)
    del model
    gc.collect()
    devices.empty_cache(device)
    return row


def _cpu_smoke():
    """Stand-ins for the GPU's clocks so the script's own logic runs on a CPU. Under Triton's
    interpreter (TRITON_INTERPRET=1) the kernels per step are counted with the GPU's op set
    (core/bench/launch_count.py); without it they are NaN."""
    import nano_full

    from bringup.core.bench import launch_count

    torch.cuda.synchronize = lambda *a, **k: None
    if launch_count.interpreting():
        launch_count.use_gpu_ops_on_cpu()
        _RUN_CONTEXT.enter_context(launch_count.gpu_weight_layout())

        def counted(engine, steps=3):
            per_step, names = launch_count.count_decode_step(engine, steps)
            return per_step, float("nan"), {name: n / steps for name, n in names.most_common(15)}
    else:
        def counted(engine, steps=3):
            return float("nan"), float("nan"), {}
    nano_full.profile_decode = globals()["profile_decode"] = counted
    global DEVICE
    DEVICE = "cpu"
    return torch.device("cpu"), 10e9, 64 * 2**30


_RUN_CONTEXT = contextlib.ExitStack()  # held for the run: the GPU's weight layout on CPU, --dense-gemv all
DEVICE = "cuda"


def table(rows: list[dict], bw: float) -> str:
    head = ("| model | params | ready s | b1 ms/step | b1 limit ms | b1 share | b32 ms/step | b32 limit ms | b32 share "
            "| kernels/step | per 50 blocks | prefill tok/s (b32) | transformers b1 tok/s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['model']} | {r['params'] / 1e9:.1f} B | {r['skipped']} |" + " |" * 10)
            continue
        b1, b32, hf = r.get("b1", {}), r.get("b32", {}), r.get("hf_b1", {})
        cell = lambda d, k, f: (f.format(d[k]) if k in d else "-")  # noqa: E731
        lines.append(
            f"| {r['model']} | {r['params'] / 1e9:.1f} B | {r.get('ready_s', float('nan')):.0f} | "
            f"{cell(b1, 'decode_ms', '{:.2f}')} | {cell(b1, 'limit_ms', '{:.2f}')} | {cell(b1, 'share', '{:.0%}')} | "
            f"{cell(b32, 'decode_ms', '{:.2f}')} | {cell(b32, 'limit_ms', '{:.2f}')} | {cell(b32, 'share', '{:.0%}')} | "
            f"{r.get('kernels_per_step', float('nan')):.0f} | {r.get('kernels_per_50_blocks', float('nan')):.0f} | "
            f"{cell(b32, 'prefill_tok_s', '{:,.0f}')} | "
            f"{hf.get('hf_tok_s') and format(hf['hf_tok_s'], '.1f') or hf.get('error', '-')[:40]} |")
    lines.append(f"\ncopy bandwidth (read + write) {bw / 1e12:.2f} TB/s")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--batches", default="1,32", type=lambda s: [int(b) for b in s.split(",")])
    ap.add_argument("--in-len", type=int, default=128)
    ap.add_argument("--out-len", type=int, default=32)
    ap.add_argument("--context", type=int, default=2048)
    ap.add_argument("--mem-fraction", type=float, default=0.88)
    ap.add_argument("--hf-new-tokens", type=int, default=16)
    ap.add_argument("--hf-max-params", type=float, default=10e9, help="largest model the transformers twin runs")
    ap.add_argument("--budget-s", type=float, default=240, help="start no model, batch or baseline after this")
    ap.add_argument("--out", default=None)
    ap.add_argument("--gate-up", choices=["auto", "fused", "apart"], default="auto",
                    help="gate and up as one GEMM + act_and_mul, or as two products, the activation and the "
                         "product (auto: the engine's choice); on the H200 the eager pair timed the fused form slower")
    ap.add_argument("--dense-gemv", choices=["off", "o_proj", "all"], default="off",
                    help="products of up to 16 rows through the Triton dense GEMV (kernels/triton/dense_gemv.py: one "
                         "launch) instead of cuBLAS: o_proj: gpt-oss's o_proj (cuBLAS ran a split-K GEMV + reduce at "
                         "batch 1), as the model would run it; all: every linear of the engine (bench/dense_linears.py)")
    ap.add_argument("--moe-forms", choices=["timed", "estimate"], default="timed",
                    help="the gated MoE's decode form per batch size: timed at graph capture (the default) or the "
                         "shapes' estimate (kernels/triton/moe_gated_forms.py); the start-up log names the timed ones")
    ap.add_argument("--profile", action="store_true",
                    help="per batch size, the eager decode step's kernels by GPU time and by module, its kernel time "
                         "against its wall time, and the graph replayed alone (bench/step_profile.py)")
    ap.add_argument("--profile-top", type=int, default=10, help="kernels listed per profile")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="run the same code on the CPU (tiny configs; figures meaningless, to check the script; with "
                         "TRITON_INTERPRET=1 the kernels per step are counted with the GPU op set)")
    args = ap.parse_args()
    os.environ["BRINGUP_MOE_FORMS"] = args.moe_forms  # read where the kernel module is first imported
    if args.dense_gemv == "o_proj":
        from bringup.core.engine.models.gpt_oss import GptOssAttention

        GptOssAttention.o_proj_gemv = True
    if args.gate_up != "auto":
        from bringup.core.engine.models.fused_gate_up import FusedGateUp

        FusedGateUp.fuse_gate_up = args.gate_up == "fused"
    began = time.perf_counter()
    deadline = began + args.budget_s
    if args.cpu_smoke:
        device, bw, total = _cpu_smoke()
    else:
        device = torch.device("cuda")
        bw = copy_bandwidth(device)
        total = torch.cuda.get_device_properties(device).total_memory
    print(f"copy bandwidth (read + write): {bw / 1e12:.2f} TB/s; {total / 2**30:.0f} GiB", flush=True)
    rows = []
    if args.dense_gemv == "all":  # the engines' forwards (not the transformers twins')
        from dense_linears import dense_gemv_linears

        _RUN_CONTEXT.enter_context(dense_gemv_linears())
    for path, config, params in engine_configs(args.configs):
        if 2 * params > 0.9 * total:
            rows.append({"model": path.stem, "params": params, "skipped": "bf16 weights exceed one device"})
        elif time.perf_counter() > deadline:
            rows.append({"model": path.stem, "params": params, "skipped": "not run (time budget)"})
        else:
            try:
                rows.append(bench_model(path, config, params, args, bw, device, deadline))
            except Exception as err:  # noqa: BLE001 - one family's failure is a row, the others still run
                rows.append({"model": path.stem, "params": params, "skipped": f"failed: {type(err).__name__}: {str(err)[:120]}"})
                print(f"{path.stem}: FAILED {type(err).__name__}: {err}", flush=True)
                gc.collect()
                torch.cuda.empty_cache()
        if args.out:
            Path(args.out).write_text(json.dumps({"bandwidth": bw, "rows": rows}, indent=1, default=str))
    print(table(rows, bw))
    print(f"total {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
