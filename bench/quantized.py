"""Quantized weights against bf16 in one run: batch-1 decode of a model with dummy weights stored in
its checkpoint's FP8 scheme (block-scaled fp8_e4m3, W8A16 kernels) and the same model in bf16, each
as a share of the device's bandwidth limit.

    python bench/quantized.py CONFIG.json [--block 128] [--out-len 64] [--out results.json]

CONFIG is the bf16 model's config.json (e.g. ../shared/models/nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json);
the FP8 twin is the same config with the quantization_config NVIDIA's and DeepSeek's FP8 checkpoints
carry (`quant_method: fp8`, `weight_block_size: [B, B]`, embeddings, lm_head and routers kept in
bf16). Both run with `--load-format dummy`: nothing is read from or written to disk but the JSON.

Per scheme: the engine's decode ms/step at batch 1 (median over the steps where the request
decodes, decode graphs on as `bringup serve` has them), tok/s, the bytes one decode step must read
(bench/nano_full.py's `step_bytes`: the non-expert weights, the experts one token routes to, its
state and KV) and that over the copy bandwidth measured here: the share of the bandwidth limit.
The ratio FP8 / bf16 is printed beside them. The weights each engine says it runs (`/server_info`'s
`weights`) are printed too, so the table names what ran.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nano_full import copy_bandwidth, run_engine_batch, step_bytes  # noqa: E402


def fp8_config(config: dict, block: int) -> dict:
    out = dict(config)
    out["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                  "weight_block_size": [block, block],
                                  "modules_to_not_convert": ["lm_head", "backbone.embeddings", "model.embed_tokens",
                                                             "mixer.gate", "mlp.gate"]}
    return out


def run_scheme(name: str, config: dict, dtype: str, args, bw: float, device) -> dict:
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config))
        t = time.perf_counter()
        engine = Engine(EngineConfig(str(path), device="cuda", dtype=dtype, load_format="dummy", max_running_requests=1,
                                     context_length=2048, mem_fraction=args.mem_fraction),
                        log=lambda m: print(f"  [{name}] {m}", flush=True))
        start_s = time.perf_counter() - t
    info = engine.server_info()
    print(f"{name}: engine ready in {start_s:.1f} s; weights {info['weights']['scheme']} "
          f"({engine.weights_bytes / 2**30:.2f} GiB), kernels {info['weights']['kernels']}", flush=True)
    vocab = int(engine.vocab_size)
    run_engine_batch(engine, 1, 16, 4, vocab, seed=99)  # warm
    row = run_engine_batch(engine, 1, args.in_len, args.out_len, vocab, seed=1)
    row.pop("work", None)
    need = step_bytes(engine.model, engine.config, 1, args.in_len + args.out_len // 2)
    limit_ms = need["total"] / bw * 1e3  # as bench/nano_full.py: the step's bytes at the copy's rate
    row.update(scheme=name, weights=info["weights"], weights_gib=engine.weights_bytes / 2**30, start_s=start_s,
               step_bytes=need["total"], limit_ms=limit_ms, share=limit_ms / row["decode_ms_step"])
    del engine
    gc.collect()
    torch.cuda.empty_cache()
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--block", type=int, default=128, help="the FP8 scheme's block (DeepSeek / Qwen3 FP8: 128)")
    ap.add_argument("--in-len", type=int, default=64)
    ap.add_argument("--out-len", type=int, default=64)
    ap.add_argument("--mem-fraction", type=float, default=0.85)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    device = torch.device("cuda")
    bw = copy_bandwidth(device)
    print(f"copy bandwidth (read + write): {bw / 1e12:.2f} TB/s", flush=True)
    config = json.loads(Path(args.config).read_text())
    rows = [run_scheme("bf16", config, "bfloat16", args, bw, device),
            run_scheme("fp8", fp8_config(config, args.block), "auto", args, bw, device)]
    bf16, fp8 = rows
    print()
    print(f"{'weights':<46} {'GiB':>6} {'ms/step':>8} {'tok/s':>7} {'limit ms':>8} {'share':>6}")
    for r in rows:
        print(f"{r['weights']['scheme']:<46} {r['weights_gib']:6.2f} {r['decode_ms_step']:8.3f} "
              f"{r['decode_tok_s']:7.1f} {r['limit_ms']:8.3f} {r['share']:6.1%}")
    print(f"fp8 / bf16 decode tok/s: {fp8['decode_tok_s'] / bf16['decode_tok_s']:.2f}x "
          f"(copy bandwidth {bw / 1e12:.2f} TB/s)")
    if args.out:
        Path(args.out).write_text(json.dumps({"bandwidth": bw, "rows": rows}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
