"""The real Nemotron-3-Nano-30B-A3B (all 128 experts, 52 blocks, bf16) with dummy weights on one GPU:
the engine against transformers' `generate` with the same weights and workload, and each figure
against the device's bandwidth limit, in one run.

    python bench/nano_full.py CONFIG.json [--batches 1,8,32,256] [--out results.json]

CONFIG is the model's config.json (e.g. ../shared/models/nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json)
or a catalogue name. Nothing is read from or written to disk but the JSON of results.

Per batch size B (B requests submitted at once, greedy, ignore_eos):
- engine: output tok/s over the whole run (prefill included), decode ms/step (steps where every
  request decodes), kernels per decode step and GPU busy share (torch.profiler over eager decode
  steps: the same kernels the graphs replay), the decode tok/s from graphs;
- the bandwidth limit: bytes one decode step must read (the non-expert weights, the experts that B
  tokens route to on average (uniform routing), each request's Mamba states read and written and its
  KV read) over the copy bandwidth measured here; each figure's share of it;
- transformers: `generate` on the same weights (copied from the engine's) and prompts, left-padded
  batch of B, `--hf-new-tokens` tokens (its Mamba and MoE paths are plain torch: it is slow).
The engine starts as `bringup serve` does, with its start-up warm-up (core/engine/warmup.py); the
bench adds no warm-up of its own beyond one tiny request per batch size.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def copy_bandwidth(device, gib: float = 4.0) -> float:
    """Bytes per second of a device-to-device copy, counting bytes read plus bytes written."""
    n = int(gib * 2**30) // 2
    a = torch.empty(n, dtype=torch.bfloat16, device=device).normal_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize(device)
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    times.sort()
    return 2 * n * 2 / times[len(times) // 2]


def step_bytes(model, config, batch: int, context: int, kv_dtype_bytes: int = 2, ssm_bytes: int = 4) -> dict:
    """Bytes one decode step of `batch` requests with `context` tokens each must move."""
    from bringup.core.engine.models.nemotron_h import Experts

    expert_total = 0
    other = 0
    moe_layers = 0
    per_expert = 0
    for name, p in model.named_parameters():
        size = p.numel() * p.element_size()
        if ".experts." in name:
            expert_total += size
        elif "embeddings" in name:
            other += batch * p.shape[1] * p.element_size()  # only the rows looked up
        else:
            other += size
    for m in model.modules():
        if isinstance(m, Experts):
            moe_layers += 1
            per_expert = (m.up_proj[0].numel() + m.down_proj[0].numel()) * m.up_proj.element_size()
    E, k = int(config["n_routed_experts"]), int(config["num_experts_per_tok"])
    touched = E * (1 - (1 - k / E) ** batch)  # distinct experts B tokens route to (uniform routing)
    experts = moe_layers * touched * per_expert
    spec = model.cache_spec
    conv = spec.conv_shape[0] * spec.conv_shape[1] * 2 if spec.conv_shape else 0
    ssm = spec.ssm_shape[0] * spec.ssm_shape[1] * spec.ssm_shape[2] * ssm_bytes if spec.ssm_shape else 0
    state = batch * len(spec.state_layer_ids) * 2 * (conv + ssm)  # read and written
    kv = batch * context * len(spec.kv_layer_ids) * 2 * spec.num_kv_heads * spec.head_dim * kv_dtype_bytes
    return {"weights": other, "experts": experts, "experts_touched": touched, "state": state, "kv": kv,
            "total": other + experts + state + kv}


def profile_decode(engine, steps: int = 3) -> tuple[float, float, dict[str, float]]:
    """(kernels per decode step, GPU busy share, the most launched kernels' names with their launches
    per step) over eager decode steps (graphs set aside)."""
    from torch.profiler import ProfilerActivity, profile

    graphs, engine.runner.decode_graphs = engine.runner.decode_graphs, None
    try:
        engine.step()  # warm
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t = time.perf_counter()
            for _ in range(steps):
                engine.step()
            torch.cuda.synchronize()
            wall = time.perf_counter() - t
    finally:
        engine.runner.decode_graphs = graphs
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    busy = sum(e.device_time for e in kernels) / 1e6  # device_time is in microseconds
    names = collections.Counter(e.name[:80] for e in kernels).most_common(15)
    return len(kernels) / steps, busy / wall, {name: n / steps for name, n in names}


def sweep_moe_tiles(device) -> dict:
    """The fused MoE at the real shapes (128 experts of 2688 x 1856, top 6, the 3712-wide shared
    expert): at decode sizes the GEMV form (shared + routed experts in two launches) per tile against
    the sorted grouped GEMMs + the shared expert apart; at prefill size (8192 tokens) the grouped
    GEMM's rows per block and tiles. Prints each, applies the fastest to this run and returns them."""
    import triton.testing

    from bringup.kernels.triton import fused_moe as fm

    E, k, H, I = 128, 6, 2688, 1856
    up = torch.randn(E, I, H, device=device, dtype=torch.bfloat16) * 0.02
    down = torch.randn(E, H, I, device=device, dtype=torch.bfloat16) * 0.02
    su = torch.randn(2 * I, H, device=device, dtype=torch.bfloat16) * 0.02
    sd = torch.randn(H, 2 * I, device=device, dtype=torch.bfloat16) * 0.02
    bench = lambda fn: triton.testing.do_bench(fn, warmup=5, rep=25, return_mode="median")  # noqa: E731
    result = {"decode": [], "prefill": []}
    gemv_tiles = [(16, 256, 4), (32, 256, 4), (8, 512, 4), (16, 512, 4), (32, 128, 4), (64, 128, 4), (16, 128, 2),
                  (8, 256, 2)]
    best_tile, gemv_max, keep_max = None, 0, fm.GEMV_MAX_TOKENS
    for T in (1, 2, 4, 8, 16):
        x = torch.randn(T, H, device=device, dtype=torch.bfloat16)
        ids = torch.stack([torch.randperm(E, device=device)[:k] for _ in range(T)])
        w = torch.rand(T, k, device=device)
        touched = len(set(ids.flatten().tolist()))
        bytes_ = (touched + 2) * 2 * I * H * 2  # routed experts touched + the shared expert
        fm.GEMV_MAX_TOKENS = 0
        sorted_ms = bench(lambda: fm.moe_experts_shared_unsummed(x, w, ids, up, down, su, sd))
        fm.GEMV_MAX_TOKENS = 64
        times = {}
        for tile in gemv_tiles:
            fm.GEMV_TILE = tile
            try:
                times[tile] = bench(lambda: fm.moe_experts_shared_unsummed(x, w, ids, up, down, su, sd))
            except Exception as err:  # noqa: BLE001 - a tile that does not compile is skipped
                print(f"  gemv tile {tile}: {type(err).__name__}", flush=True)
        tile, ms = min(times.items(), key=lambda kv: kv[1])
        if T == 1:
            best_tile = tile
        if ms < sorted_ms and gemv_max == (T // 2 if T > 1 else 0):  # the GEMV form wins at every size up to T
            gemv_max = T
        row = {"T": T, "sorted_ms": sorted_ms, "gemv_best_tile": tile, "gemv_ms": ms,
               "gemv_ms_by_tile": {str(t): v for t, v in times.items()}}
        result["decode"].append(row)
        print(f"moe+shared T={T:>3}: sorted+mlp {sorted_ms:.3f} ms = {bytes_ / sorted_ms / 1e9:.2f} TB/s; gemv best "
              f"{tile} {ms:.3f} ms = {bytes_ / ms / 1e9:.2f} TB/s ({touched} experts + shared)", flush=True)
    fm.GEMV_TILE, fm.GEMV_MAX_TOKENS = best_tile, gemv_max if gemv_max else keep_max
    result["applied_gemv"] = {"tile": best_tile, "max_tokens": fm.GEMV_MAX_TOKENS}
    print(f"applied: GEMV tile {best_tile} up to {fm.GEMV_MAX_TOKENS} tokens", flush=True)
    T = 8192
    x = torch.randn(T, H, device=device, dtype=torch.bfloat16)
    ids = torch.stack([torch.randperm(E, device=device)[:k] for _ in range(T)])
    w = torch.rand(T, k, device=device)
    flops = T * k * 2 * 2 * I * H
    best = None
    for block_m in (64, 128):
        for tile in [(128, 64, 8, 3), (128, 64, 4, 4), (256, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 4),
                     (256, 64, 8, 4)]:
            fm.TILE_OVERRIDE.update({"all": tile, "block_m": block_m})
            try:
                ms = bench(lambda: fm.moe_experts_unsummed(x, w, ids, up, down))
            except Exception as err:  # noqa: BLE001
                print(f"  prefill block_m {block_m} tile {tile}: {type(err).__name__}", flush=True)
                continue
            result["prefill"].append({"block_m": block_m, "tile": tile, "ms": ms, "tflops": flops / ms / 1e9})
            print(f"moe T=8192 block_m {block_m} tile {tile}: {ms:.2f} ms = {flops / ms / 1e9:.0f} TFLOP/s", flush=True)
            if best is None or ms < best[2]:
                best = (block_m, tile, ms)
    fm.TILE_OVERRIDE.clear()
    default = bench(lambda: fm.moe_experts_unsummed(x, w, ids, up, down))
    print(f"moe T=8192 default: {default:.2f} ms = {flops / default / 1e9:.0f} TFLOP/s", flush=True)
    if best is not None and best[2] < default:
        fm.LARGE_BLOCK_M, fm.LARGE_TILE = best[0], best[1]
        result["applied_prefill"] = {"block_m": best[0], "tile": best[1]}
        print(f"applied: prefill block_m {best[0]}, tile {best[1]}", flush=True)
    del up, down, su, sd
    torch.cuda.empty_cache()
    return result


def graph_replay_ms(engine, bucket: int) -> float:
    """GPU time of one captured decode step (the graph replayed alone, no host work between)."""
    graph = engine.runner.decode_graphs._graphs[bucket][0]
    for _ in range(3):
        graph.replay()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        graph.replay()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 20


def top_kernels(engine, n: int = 14, prefill_tokens: int = 0) -> str:
    """torch.profiler's table of the top device kernels over one eager step (decode, or a prefill
    of `prefill_tokens` prompt tokens)."""
    from torch.profiler import ProfilerActivity, profile

    graphs, engine.runner.decode_graphs = engine.runner.decode_graphs, None
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            engine.step()
            torch.cuda.synchronize()
    finally:
        engine.runner.decode_graphs = graphs
    return prof.key_averages().table(sort_by="device_time_total", row_limit=n, max_name_column_width=60)


def run_engine_batch(engine, B: int, in_len: int, out_len: int, vocab: int, seed: int, trace=None,
                     profile_step: int | None = None, profile_dir: str | None = None) -> dict:
    from bringup.core.bench.throughput import make_workload
    from bringup.core.engine.sampling import SamplingParams

    work = make_workload(B, (in_len, in_len), (out_len, out_len), seed, vocab)
    params = SamplingParams(max_new_tokens=out_len, temperature=0.0, ignore_eos=True)
    torch.cuda.synchronize()
    start = time.perf_counter()
    ids = [engine.add_request(p, params, detokenize=False) for p, _ in work]
    produced = {rid: 0 for rid in ids}
    decode_times, steps = [], 0
    mixed = {"steps": 0, "seconds": 0.0, "prompt_tokens": 0}  # steps that carry prompt tokens
    while engine.has_unfinished():
        sch = engine.scheduler
        all_decoding = (len(sch.running) == B and not sch.waiting
                        and all(r.num_computed >= len(r.prompt_ids) for r in sch.running))
        prompt_left = sum(max(0, len(r.prompt_ids) - r.num_computed) for r in list(sch.running) + list(sch.waiting))
        t = time.perf_counter()
        if profile_step is not None and steps == profile_step and profile_dir:
            outs = _profiled_step(engine, Path(profile_dir, f"step{steps}_b{B}.txt"))
        elif trace is not None:
            with trace.step(f"b{B} step {steps}", prompt_left=prompt_left, running=len(sch.running),
                            waiting=len(sch.waiting)):
                outs = engine.step()
            last = engine.last_step
            trace.rows[-1]["tokens"] = last.num_tokens if last is not None else 0
        else:
            outs = engine.step()
        if prompt_left:
            left = sum(max(0, len(r.prompt_ids) - r.num_computed) for r in list(sch.running) + list(sch.waiting))
            mixed["steps"] += 1
            mixed["seconds"] += time.perf_counter() - t
            mixed["prompt_tokens"] += prompt_left - left
        if all_decoding and all(not o.finished for o in outs):
            decode_times.append(time.perf_counter() - t)
        for o in outs:
            produced[o.request_id] += len(o.token_ids)
        steps += 1
    seconds = time.perf_counter() - start
    total = sum(produced.values())
    assert total == B * out_len, f"engine produced {total} tokens, expected {B * out_len}"
    decode_times.sort()
    ms = 1e3 * decode_times[len(decode_times) // 2] if decode_times else float("nan")
    return {"batch": B, "input_len": in_len, "output_len": out_len, "seconds": seconds, "tok_s": total / seconds,
            "prefill_steps": mixed["steps"], "prefill_seconds": mixed["seconds"], "prefill_tokens": mixed["prompt_tokens"],
            "decode_ms_step": ms, "decode_tok_s": B / ms * 1e3 if decode_times else None, "work": work}


def _profiled_step(engine, path: Path):
    """One engine step under torch.profiler: host (self CPU) and device tables to `path`."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        outs = engine.step()
        torch.cuda.synchronize()
    wall = time.perf_counter() - t
    events = prof.key_averages()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.device_time for e in kernels) / 1e6
    path.write_text(f"wall {wall * 1e3:.1f} ms (profiled), GPU kernel time {busy * 1e3:.1f} ms, {len(kernels)} kernels\n\n"
                    "By self CPU time:\n" + events.table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=70)
                    + "\nBy device time:\n" + events.table(sort_by="device_time_total", row_limit=25, max_name_column_width=70))
    return outs


def _nothing():
    from contextlib import nullcontext

    return nullcontext()


def _print_trace(trace, prefix: str) -> None:
    """The traced steps of one run that carried prompt tokens, compiled or were slow, one line each."""
    rows = [r for r in trace.rows if r["label"].startswith(prefix)]
    if not rows:
        return
    times = sorted(r["seconds"] for r in rows)
    median = times[len(times) // 2]
    for r in rows:
        if r.get("prompt_left") or r["compiles"] or r["seconds"] > 1.5 * median or r["label"] == "engine start":
            print(f"  [trace] {trace.summary(r)}; tokens {r.get('tokens', '-')}, running {r.get('running', '-')}",
                  flush=True)
    print(f"  [trace] {prefix.strip()}: {len(rows)} steps, {sum(r['compiles'] for r in rows)} compiles "
          f"({sum(r['compile_s'] for r in rows):.2f} s), autotune {sum(r['autotune_s'] for r in rows):.2f} s, "
          f"{sum(r['seconds'] for r in rows):.2f} s in all", flush=True)


def run_hf(model, work, B: int, new_tokens: int, pad_id: int, device) -> dict:
    from bringup.core.bench.throughput import run_transformers

    short = [(p, new_tokens) for p, _ in work[:B]]
    run_transformers(model, [(p[:8], 2) for p, _ in short], B, pad_id, device)  # warm-up
    seconds = run_transformers(model, short, B, pad_id, device)
    return {"hf_seconds": seconds, "hf_tok_s": B * new_tokens / seconds, "hf_new_tokens": new_tokens}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--batches", default="1,8,32,256")
    ap.add_argument("--in-len", type=int, default=128, help="prompt tokens (batches below 256)")
    ap.add_argument("--out-len", type=int, default=128, help="output tokens (batches below 256)")
    ap.add_argument("--big-in-len", type=int, default=1024, help="prompt tokens at batch >= 256")
    ap.add_argument("--big-out-len", type=int, default=256, help="output tokens at batch >= 256")
    ap.add_argument("--hf-new-tokens", type=int, default=16)
    ap.add_argument("--hf-max-batch", type=int, default=32, help="largest batch the transformers baseline runs")
    ap.add_argument("--mem-fraction", type=float, default=0.88)
    ap.add_argument("--out", default=None)
    ap.add_argument("--budget-s", type=float, default=520, help="skip what would start after this many seconds")
    ap.add_argument("--chunked-prefill-size", type=int, default=32768,
                    help="prefill tokens per step (H200, 256 x 1024 prompts: 32768 gave 5,104 output tok/s, "
                         "16384 4,144, 8192 3,752 before this work)")
    ap.add_argument("--mixed-prefill-size", type=int, default=None,
                    help="prefill tokens in a step with decodes (default: the chunk, as this bench ran before the "
                         "engine's smaller mixed budget; `bringup serve` takes the planner's)")
    ap.add_argument("--sweep", action="store_true", help="sweep the fused MoE's GEMM tiles first")
    ap.add_argument("--profile-dir", default=None, help="write top-kernel tables (decode B=1, prefill) here")
    ap.add_argument("--profile-step", type=int, default=None,
                    help="with --profile-dir: profile this step of the batch-256 run (host and device tables)")
    ap.add_argument("--no-warmup", action="store_true",
                    help="start the engine without its start-up warm-up (to compare; users get the warm-up)")
    ap.add_argument("--trace-steps", default=None,
                    help="time every step (compiles, autotunes, new allocator segments, GC) and write them here (JSON)")
    args = ap.parse_args()
    began = time.perf_counter()
    batches = [int(b) for b in args.batches.split(",")]
    device = torch.device("cuda")
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine

    bw = copy_bandwidth(device)
    print(f"copy bandwidth (read + write): {bw / 1e12:.2f} TB/s", flush=True)
    sweep = sweep_moe_tiles(device) if args.sweep else {}
    trace = None
    if args.trace_steps:
        from step_trace import StepTrace

        trace = StepTrace().install()
    t = time.perf_counter()
    with (trace.step("engine start", alloc=True) if trace is not None else _nothing()):
        config = EngineConfig(args.config, device="cuda", dtype="bfloat16", load_format="dummy",
                              max_running_requests=max(batches), mem_fraction=args.mem_fraction, context_length=4096,
                              chunked_prefill_size=args.chunked_prefill_size,
                              mixed_prefill_size=args.mixed_prefill_size or args.chunked_prefill_size, warmup=False if args.no_warmup else None)
        engine = Engine(config,
                        log=lambda m: print(f"  [engine] {m}", flush=True))
    if trace is not None:
        _print_trace(trace, "engine start")
    info = engine.server_info()
    print(f"engine ready in {time.perf_counter() - t:.1f} s: {info['architecture']}, {info['params'] / 1e9:.2f} B params, "
          f"weights: {info['weights_source']} (load_format {info['load_format']}), tokenizer: {info['tokenizer_source']}, "
          f"{info['dtype']}, graphs {info['decode_graphs']}, kernels: "
          f"{ {k: v for k, v in engine.model.ops.implementations.items() if v != 'reference'} }", flush=True)
    vocab = int(engine.vocab_size)
    rows = []
    for B in batches:
        if time.perf_counter() - began > args.budget_s:
            print(f"batch {B}: skipped (time budget)", flush=True)
            continue
        big = B >= 256
        in_len, out_len = (args.big_in_len, args.big_out_len) if big else (args.in_len, args.out_len)
        run_engine_batch(engine, min(B, 2), 16, 4, vocab, seed=99)  # warm (compiles at new shapes)
        row = run_engine_batch(engine, B, in_len, out_len, vocab, seed=B, trace=trace,
                               profile_step=args.profile_step if big else None, profile_dir=args.profile_dir)
        if trace is not None:
            _print_trace(trace, f"b{B} ")
        # Kernels and busy share: B requests decoding, eager.
        from bringup.core.engine.sampling import SamplingParams

        for p, _ in row["work"]:
            engine.add_request(p[:16], SamplingParams(max_new_tokens=8, temperature=0.0, ignore_eos=True),
                               detokenize=False)
        sch = engine.scheduler
        while sch.waiting or any(r.num_computed < len(r.prompt_ids) for r in sch.running):
            engine.step()  # prompts in: the profiled steps decode only
        row["kernels_per_step"], row["busy_eager"], row["top_kernels"] = profile_decode(engine)
        if engine.decode_graphs is not None and B in engine.decode_graphs.buckets:
            row["graph_replay_ms"] = graph_replay_ms(engine, B)
        if args.profile_dir and B == 1:
            Path(args.profile_dir, "decode_b1.txt").write_text(top_kernels(engine))
        while engine.has_unfinished():
            engine.step()
        sb = step_bytes(engine.model, engine.config, B, in_len + out_len // 2)
        row["bytes_per_step"] = sb
        row["limit_ms"] = sb["total"] / bw * 1e3
        row["limit_tok_s"] = B / (sb["total"] / bw)
        row["share_of_limit"] = (row["decode_tok_s"] or 0) / row["limit_tok_s"]
        rows.append(row)
        print(f"batch {B:>4}: engine {row['tok_s']:8.1f} tok/s overall, decode {row['decode_ms_step']:.2f} ms/step "
              f"= {row['decode_tok_s'] or 0:8.1f} tok/s ({row['share_of_limit']:.0%} of the {row['limit_tok_s']:.0f} "
              f"tok/s limit: {sb['total'] / 1e9:.2f} GB/step, {sb['experts_touched']:.1f} experts/layer), "
              f"{row['kernels_per_step']:.0f} kernels/step, GPU busy {row['busy_eager']:.0%} (eager), "
              f"graph replay alone {row.get('graph_replay_ms', float('nan')):.2f} ms; steps with prompt tokens: "
              f"{row['prefill_steps']} in {row['prefill_seconds']:.2f} s "
              f"({row['prefill_tokens'] / max(row['prefill_seconds'], 1e-9):,.0f} prompt tok/s), the rest "
              f"{row['seconds'] - row['prefill_seconds']:.2f} s", flush=True)
    if args.profile_dir and time.perf_counter() - began < args.budget_s:
        from bringup.core.engine.sampling import SamplingParams

        import random

        rng = random.Random(5)
        for _ in range(4):
            engine.add_request([rng.randint(3, vocab - 1) for _ in range(2048)],
                               SamplingParams(max_new_tokens=1, temperature=0.0, ignore_eos=True), detokenize=False)
        Path(args.profile_dir, "prefill_8k.txt").write_text(top_kernels(engine, n=20))
        while engine.has_unfinished():
            engine.step()
    pad_id = int(engine.config.get("pad_token_id") or 0)
    # transformers with the same weights
    hf_batches = [r for r in rows if r["batch"] <= args.hf_max_batch]
    if hf_batches and time.perf_counter() - began < args.budget_s:
        from bringup.core.engine import device as devices
        from bringup.core.bench.hf_twin import transformers_twin

        model, config = engine.model, engine.config
        del engine
        gc.collect()
        devices.empty_cache(device)
        try:
            twin = transformers_twin(model, config, device, torch.bfloat16)
            del model
            gc.collect()
            for row in hf_batches:
                if time.perf_counter() - began > args.budget_s:
                    print(f"transformers batch {row['batch']}: skipped (time budget)", flush=True)
                    continue
                row.update(run_hf(twin, row["work"], row["batch"], args.hf_new_tokens, pad_id, device))
                print(f"batch {row['batch']:>4}: transformers {row['hf_tok_s']:8.1f} tok/s "
                      f"({args.hf_new_tokens} new tokens, left-padded batch) -> engine decode "
                      f"{(row['decode_tok_s'] or 0) / row['hf_tok_s']:.1f}x, overall {row['tok_s'] / row['hf_tok_s']:.1f}x",
                      flush=True)
        except Exception as err:  # noqa: BLE001 - the engine's figures stand without the baseline
            print(f"transformers baseline failed: {type(err).__name__}: {str(err)[:300]}", flush=True)
    print(f"\nmodel: {info['architecture']}, {info['params'] / 1e9:.2f} B params, weights: {info['weights_source']}, "
          f"{info['dtype']}, {info['device_name']}")
    print("| batch | in/out | engine tok/s (overall) | decode ms/step | graph replay ms | decode tok/s | limit tok/s | "
          "share | kernels/step | GPU busy (eager) | transformers tok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        hf = f"{r['hf_tok_s']:.1f}" if "hf_tok_s" in r else "not run"
        print(f"| {r['batch']} | {r['input_len']}/{r['output_len']} | {r['tok_s']:.1f} | {r['decode_ms_step']:.2f} | "
              f"{r.get('graph_replay_ms', float('nan')):.2f} | "
              f"{r['decode_tok_s'] or 0:.1f} | {r['limit_tok_s']:.0f} | {r['share_of_limit']:.0%} | "
              f"{r['kernels_per_step']:.0f} | {r['busy_eager']:.0%} | {hf} |")
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s; total {time.perf_counter() - began:.0f} s")
    if trace is not None:
        Path(args.trace_steps).write_text(json.dumps(trace.rows, indent=1, default=str))
    if args.out:
        for r in rows:
            r.pop("work", None)
        model_info = {key: info.get(key) for key in ("architecture", "params", "load_format", "weights_source",
                                                     "tokenizer_source", "dtype", "device_name", "decode_graphs")}
        Path(args.out).write_text(json.dumps({"model": model_info, "bandwidth": bw, "rows": rows, "moe_sweep": sweep},
                                             indent=2,
                                             default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
