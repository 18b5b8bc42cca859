"""Overlapped steps against the plain loop, one engine, the same requests, alternating: output tok/s,
mean step() wall time, and whether the greedy tokens agree.

    python bench/overlap_ab.py SOURCE --device cuda --load-format dummy [--levels 1,256] [--prompts 4,128]

Each level runs its requests (random prompts of --input-len, --output-len out, greedy, ignore_eos) as a
closed loop of `level` in flight, plain and overlapped (EngineConfig.overlap) in turn, --rounds times;
the figure of each mode is its fastest run. Step wall time is the host's time inside step() per call:
with overlap the host waits for step n while step n+1 is already queued, so the difference is the host
work the device no longer waits for.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving import make_requests  # noqa: E402


def run(engine, work, concurrency: int, overlap: bool) -> dict:
    from bringup.core.engine.sampling import SamplingParams

    engine.overlap = overlap
    queue, live, tokens, step_walls = list(work), {}, {}, []
    started = time.perf_counter()
    while queue or engine.has_unfinished():
        while queue and len(live) < concurrency:
            prompt, n = queue.pop(0)
            rid = engine.add_request(prompt, SamplingParams(max_new_tokens=n, temperature=0.0, ignore_eos=True),
                                     detokenize=False)
            live[rid] = len(work) - len(queue) - 1
            tokens[live[rid]] = []
        t = time.perf_counter()
        outs = engine.step()
        step_walls.append(time.perf_counter() - t)
        for out in outs:
            tokens[live[out.request_id]] += out.token_ids
            if out.finished:
                live.pop(out.request_id)
    seconds = time.perf_counter() - started
    produced = sum(len(v) for v in tokens.values())
    return {"tok_s": produced / seconds, "step_ms": 1e3 * sum(step_walls) / len(step_walls),
            "tokens": [tokens[i] for i in range(len(work))]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--load-format", default="auto")
    ap.add_argument("--levels", default="1,256")
    ap.add_argument("--prompts", default="4,128")
    ap.add_argument("--input-len", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2, help="plain/overlapped pairs per level (the fastest counts)")
    ap.add_argument("--warmup", action="store_true", help="the engine's own start-up warm-up (default: a short pass)")
    args = ap.parse_args()
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.model_source import model_source
    from bringup.core.sources.default_model import resolve_default

    model = resolve_default(args.source) or model_source(args.source, args.load_format)[0]
    engine = Engine(EngineConfig(model, device=args.device, load_format=args.load_format, warmup=None if args.warmup else False), log=lambda m: print(f"  [engine] {m}", flush=True))
    vocab = int(engine.vocab_size or len(engine.tokenizer))
    levels, counts = [int(x) for x in args.levels.split(",")], [int(x) for x in args.prompts.split(",")]
    for c, n in zip(levels, counts):
        work = make_requests("fixed", n, args.input_len, args.output_len, 1.0, vocab, c)
        run(engine, [(p[: args.input_len], 8) for p, _ in work[: min(n, 8)]], c, False)  # one-time costs
        run(engine, [(p[: args.input_len], 8) for p, _ in work[: min(n, 8)]], c, True)
        rows = {False: [], True: []}
        for overlap in (False, True) * args.rounds:
            rows[overlap].append(run(engine, work, c, overlap))
        plain, over = (max(rows[m], key=lambda r: r["tok_s"]) for m in (False, True))
        same = plain["tokens"] == over["tokens"]
        print(f"concurrency {c}, {n} requests: plain {plain['tok_s']:,.0f} tok/s ({plain['step_ms']:.2f} ms per step() "
              f"call), overlapped {over['tok_s']:,.0f} tok/s ({over['step_ms']:.2f} ms per call): "
              f"{over['tok_s'] / plain['tok_s']:.1%}; greedy tokens {'the same' if same else 'DIFFER'}", flush=True)
        engine.check_pools()
    return 0


if __name__ == "__main__":
    sys.exit(main())
