"""The server path against the engine in-process, same workload, same run: what HTTP costs a user.

    python bench/serving_vs_engine.py SOURCE [--device cuda] [--load-format dummy] [--levels 1,16,64,256]
        [--input-len 1024] [--output-len 256] [--prompts 8,32,128,256] [--json-out F] [--serve-flags '...']

1. In-process: the engine with `bringup serve`'s default settings (EngineConfig as serve builds it)
   runs each level's requests with at most `level` in flight (a closed loop, as the serving
   benchmark's clients), greedy with ignore_eos: output tok/s and per-request tok/s. With
   `--in-process-chunk N` the largest level runs once more with N prompt tokens per step (e.g.
   bench/nano_full.py's 32768).
2. The server: `bringup serve SOURCE` with its default flags (plus --serve-flags), driven by
   bench/serving.py at each level on the very same requests (same seeds); its table, with each
   level's share of the in-process figure. Then a second start of the server, to show the start-up
   with Triton's / inductor's caches warm (`--second-start`).
3. With `--vs-bench`, every level runs `bringup bench SOURCE`'s own workload (its defaults: 16
   requests, prompts 16:64, outputs 16:64, seed 0), and `bringup bench`'s figure is measured on the
   in-process engine as the bench measures it (core/bench/throughput.run_engine: every request at
   once, the fastest of its runs); each served level shows its share of that figure too. On the CPU
   the engine stays loaded and one bench run precedes each served run, so a neighbour's busy spell
   on a shared machine slows a run of each side alike.
   `--cpu-threads N` sets the in-process engine's threads (default: the idle cores, as the bench).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import serving  # noqa: E402  (bench/serving.py)
from serve_check import start, stop  # noqa: E402


def in_process_level(engine, work, concurrency: int) -> dict:
    """One level in-process: tok/s, each request's TTFT and inter-token gaps (the time between the
    step() calls that returned its outputs, as a client of the engine would see them), and a step
    trace: each step's kind (decode rows only, prompt tokens only, or mixed), its wall time and its
    prompt tokens, to show which steps make the slow gaps."""
    from bringup.core.engine.sampling import SamplingParams

    queue = list(work)
    live: dict[str, list[float]] = {}  # request id -> [arrival, last output time]
    produced, per_request, ttft, itl, steps = 0, [], [], [], []
    started = time.perf_counter()
    previous = None  # overlapped steps: a step() call reads the tokens of the step launched before it
    while queue or live:
        while queue and len(live) < concurrency:
            prompt, n = queue.pop(0)
            rid = engine.add_request(prompt, SamplingParams(max_new_tokens=n, temperature=0.0, ignore_eos=True),
                                     detokenize=False)
            now = time.perf_counter()
            live[rid] = [now, None]
        t0 = time.perf_counter()
        outs = engine.step()
        now = time.perf_counter()
        made = _composition(engine.last_step)  # read now: the books move on with the next step
        shown = previous if getattr(engine, "overlap", False) else made
        previous = made
        if shown is not None:
            steps.append((*shown[:1], now - t0, *shown[1:]))
        for out in outs:
            produced += len(out.token_ids)
            times = live[out.request_id]
            if out.token_ids:
                if times[1] is None:
                    ttft.append(now - times[0])
                else:
                    itl.append((now - times[1]) / len(out.token_ids))
                times[1] = now
            if out.finished:
                per_request.append(out.completion_tokens / (now - live.pop(out.request_id)[0]))
    seconds = time.perf_counter() - started
    return {"concurrency": concurrency, "requests": len(work), "output_tokens": produced, "seconds": seconds,
            "output_tok_s": produced / seconds, "per_request_tok_s": sum(per_request) / len(per_request),
            "ttft_s": serving.percentiles(ttft), "itl_s": serving.percentiles(itl), "steps": _step_summary(steps)}


def bench_workload(source: str, vocab: int) -> list[tuple[list[int], int]]:
    """The requests `bringup bench SOURCE` runs with its default flags."""
    from bringup.core.bench.throughput import BenchSettings, make_workload

    s = BenchSettings(source)
    return make_workload(s.num_seqs, s.input_len, s.output_len, s.seed, vocab)


def bench_figure(runs, threads) -> dict:
    """`bringup bench`'s figure: the fastest of its runs."""
    seconds, tokens = min(runs)
    out = {"output_tok_s": tokens / seconds, "output_tokens": tokens, "runs_s": [r[0] for r in runs],
           "threads": threads}
    print(f"`bringup bench` (every request at once, fastest of {len(runs)}): {out['output_tok_s']:,.0f} output tok/s"
          + (f", {threads} CPU thread(s)" if threads else ""), flush=True)
    return out


def _composition(step) -> tuple[str, int, int] | None:
    """(kind, prompt tokens, decode rows) of a step just recorded (a decode row is past its prompt)."""
    if step is None or not step.requests:
        return None
    decode = sum(1 for r, n in zip(step.requests, step.num_new_tokens)
                 if n == 1 and r.num_computed > len(r.prompt_ids))
    prompt = step.num_tokens - decode
    return ("decode" if not prompt else "prefill" if not decode else "mixed"), prompt, decode


def _step_summary(rows) -> dict:
    """Per kind of step: how many, wall ms p50 / p99, mean prompt tokens and decode rows."""
    out = {}
    for kind in ("decode", "mixed", "prefill"):
        mine = [r for r in rows if r[0] == kind]
        if mine:
            ms = serving.percentiles([r[1] * 1e3 for r in mine])
            out[kind] = {"steps": len(mine), "ms_p50": ms["p50"], "ms_p99": ms["p99"],
                         "prompt_tokens_mean": sum(r[2] for r in mine) / len(mine),
                         "decode_rows_mean": sum(r[3] for r in mine) / len(mine)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--load-format", default="auto")
    ap.add_argument("--levels", default="1,16,64,256")
    ap.add_argument("--prompts", default=None, help="requests per level, comma-separated (default 2 x level, >= 8)")
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--range-ratio", type=float, default=1.0)
    ap.add_argument("--dataset", default="random")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--in-process-chunk", type=int, default=None)
    ap.add_argument("--second-start", action="store_true")
    ap.add_argument("--all-at-once", action="store_true",
                    help="in-process, submit each level's requests at once (as `bringup bench` does) instead of a closed loop")
    ap.add_argument("--repeats", type=int, default=1, help="runs per level and side, the fastest counts (CPU: 3)")
    ap.add_argument("--ready-timeout", type=float, default=600)
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--serve-flags", default="", help="more `bringup serve` flags, one string (e.g. '--cpu-threads 1')")
    ap.add_argument("--vs-bench", action="store_true",
                    help="every level runs `bringup bench`'s workload, and its figure is printed beside the server's")
    ap.add_argument("--cpu-threads", type=int, default=None, help="the in-process engine's CPU threads")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    counts = [int(x) for x in args.prompts.split(",")] if args.prompts else [max(8, 2 * c) for c in levels]
    result: dict = {"source": args.source, "levels": levels, "prompts": counts}

    from bringup.core.engine import device as devices
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.model_source import model_source
    from bringup.core.sources.default_model import resolve_default

    model = resolve_default(args.source) or model_source(args.source, args.load_format)[0]
    t = time.monotonic()
    engine = Engine(EngineConfig(model, device=args.device, load_format=args.load_format, cpu_threads=args.cpu_threads),
                    log=lambda m: print(f"  [engine] {m}", flush=True))
    result["in_process_start_s"] = time.monotonic() - t
    vocab = int(engine.vocab_size or len(engine.tokenizer))
    if args.vs_bench:
        works = [bench_workload(args.source, vocab)] * len(levels)
        result["prompts"] = [len(w) for w in works]
    else:
        works = [serving.make_requests(args.dataset, n, args.input_len, args.output_len, args.range_ratio, vocab,
                                       args.seed + k) for k, n in enumerate(counts)]
    from bringup.core.engine.sampling import SamplingParams

    # one tiny request: the first steps' one-time costs
    engine.generate([works[0][0][0][:16]], SamplingParams(max_new_tokens=4, temperature=0.0, ignore_eos=True))
    rows = []
    for c, work in zip(levels, works):
        runs = [in_process_level(engine, work, len(work) if args.all_at_once else c) for _ in range(args.repeats)]
        row = max(runs, key=lambda r: r["output_tok_s"])
        row["runs_tok_s"] = [r["output_tok_s"] for r in runs]
        rows.append(row)
        print(f"in-process concurrency {c}: {row['output_tok_s']:,.0f} output tok/s, "
              f"{row['per_request_tok_s']:,.0f} per request", flush=True)
    result["in_process"] = rows
    # On the CPU the bench's runs alternate with the server's (the engine stays loaded, idle meanwhile),
    # so a neighbour's busy spell on a shared machine slows one run of each side rather than one side.
    alternate = args.vs_bench and engine.device.type == "cpu"
    from bringup.core.bench.throughput import run_engine

    bench: list = []  # (seconds, tokens) of each run timed as `bringup bench` times it
    threads = getattr(engine, "cpu_threads", None)
    bench_once = lambda: bench.append(run_engine(engine, works[0]))  # noqa: E731
    if args.vs_bench and not alternate:
        for _ in range(args.repeats):
            bench_once()
        result["bench"] = bench_figure(bench, threads)
    if args.in_process_chunk:
        engine.scheduler.token_budget = engine.scheduler.mixed_budget = args.in_process_chunk  # as nano_full.py's
        row = in_process_level(engine, works[-1], levels[-1])
        row["chunk"] = args.in_process_chunk
        result["in_process_chunk"] = row
        print(f"in-process concurrency {levels[-1]}, {args.in_process_chunk} prompt tokens per step: "
              f"{row['output_tok_s']:,.0f} output tok/s", flush=True)
    engine.check_pools()
    device = engine.device
    if not alternate:
        del engine
    import gc

    gc.collect()
    devices.empty_cache(device)  # the server below takes the device's memory for itself

    argv = [sys.executable, "-P", "-m", "bringup", "serve", args.source, "--host", "127.0.0.1", "--port", "0",
            "--device", args.device, "--load-format", args.load_format, *shlex.split(args.serve_flags)]
    result["starts"] = [serve_levels(argv, args, levels, works, result, bench_once if alternate else None)]
    if alternate:
        result["bench"] = bench_figure(bench, threads)
    report(result, rows, args)
    if args.second_start:  # the same start again: Triton's and inductor's caches are warm now
        result["starts"].append(serve_levels(argv, args, [], [], result))
        report(result, rows, args)
    return 0


def serve_levels(argv, args, levels, works, result, before_each=None) -> dict:
    """Start the server, run the levels through bench/serving.py (none: only the start), stop it.
    `before_each()` runs before every served run (the in-process bench's alternating runs)."""
    print("$ " + " ".join(argv), flush=True)
    t0 = time.monotonic()
    proc, base, lines = start(argv, args.ready_timeout)
    started = {"ready_s": time.monotonic() - t0,
               "lines": [x for x in lines if "Start-up:" in x or "Ready in" in x or "Warm-up" in x
                         or "Prompt tokens per step" in x or "Capture cuda graph end" in x
                         or "CPU threads" in x]}
    try:
        served = []
        for k, (c, work) in enumerate(zip(levels, works)):
            target = serving.Target(base, None, None)
            asyncio.run(serving.run_level(target, [(p[:16], 4) for p, _ in work[:2]], None, float("inf"), 0))
            runs = []
            for _ in range(args.repeats):
                if before_each is not None:
                    before_each()
                res, seconds = asyncio.run(serving.run_level(target, work, c, float("inf"), args.seed + k))
                runs.append(serving.summarise(res, seconds, c, float("inf")))
            row = max(runs, key=lambda r: r["output_tok_s"])
            row["runs_tok_s"] = [r["output_tok_s"] for r in runs]
            served.append(row)
            print(f"served concurrency {c}: {row['output_tok_s']:,.0f} output tok/s, {row['errors']} errors", flush=True)
        if levels:
            result["served"] = served
    finally:
        stop(proc)
    return started


def _ms(p: dict) -> str:
    return "-" if p.get("p50") is None else f"{p['p50'] * 1e3:.1f} / {p['p99'] * 1e3:.1f}"


def report(result, rows, args) -> None:
    for s in result["starts"]:
        print(f"start: ready in {s['ready_s']:.1f} s; " + " | ".join(s["lines"]), flush=True)
    mode = "all requests at once, as `bringup bench`" if args.all_at_once else "closed loop"
    print(f"\nIn-process (the engine alone, serve's defaults, {mode}):")
    print("| concurrent | requests | output tok/s | per request tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms |"
          "\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['concurrency']} | {r['requests']} | {r['output_tok_s']:,.0f} | {r['per_request_tok_s']:,.0f} | "
              f"{_ms(r['ttft_s'])} | {_ms(r['itl_s'])} |")
    print("\nIn-process steps by kind (wall ms of each step() call; mixed: decode rows beside prompt tokens):")
    print("| concurrent | kind | steps | ms p50 / p99 | prompt tokens (mean) | decode rows (mean) |\n|---|---|---|---|---|---|")
    for r in rows:
        for kind, k in r["steps"].items():
            print(f"| {r['concurrency']} | {kind} | {k['steps']} | {k['ms_p50']:.1f} / {k['ms_p99']:.1f} | "
                  f"{k['prompt_tokens_mean']:,.0f} | {k['decode_rows_mean']:,.0f} |")
    if "in_process_chunk" in result:
        r = result["in_process_chunk"]
        print(f"| {r['concurrency']}, chunk {r['chunk']} | {r['requests']} | {r['output_tok_s']:,.0f} | "
              f"{r['per_request_tok_s']:,.0f} |")
    print("\nThrough `bringup serve` (bench/serving.py), share of the in-process figure per level:")
    table = serving.table(result.get("served", []), None).splitlines()
    table[0] += " share of in-process |"
    table[1] += "---|"
    bench = result.get("bench")
    if bench:
        table[0] += " share of `bringup bench` |"
        table[1] += "---|"
    for i, (srv, inp) in enumerate(zip(result.get("served", []), rows)):
        table[2 + i] += f" {srv['output_tok_s'] / inp['output_tok_s']:.0%} |"
        if bench:
            table[2 + i] += f" {srv['output_tok_s'] / bench['output_tok_s']:.0%} |"
    if bench:
        print(f"\n`bringup bench`'s figure, same requests, same run: {bench['output_tok_s']:,.0f} output tok/s "
              f"({bench['output_tokens']} tokens, {bench['threads'] or '-'} CPU thread(s), runs "
              + ", ".join(f"{r:.2f}" for r in bench["runs_s"]) + " s)")
    print("\n".join(table), flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(main())
