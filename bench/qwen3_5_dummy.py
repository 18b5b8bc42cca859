"""Throughput of the engine on a Qwen3.5-shaped model with dummy weights, next to transformers'
`generate` on the same random weights, in one run (core/bench/throughput.py does the measuring; the
transformers model gets the engine's weights through hf_twin.py).

    python bench/qwen3_5_dummy.py [--device cuda] [--layers 8] [--num-seqs 16] [--input-len 64:256]
                                  [--output-len 32:64] [--json OUT.json]

The shape is Qwen3.5-35B-A3B's text decoder (transformers' Qwen3_5MoeTextConfig defaults, which are
that checkpoint's): hidden 2048, gated DeltaNet (16 key / 32 value heads of 128) three layers in
four, gated attention (16 heads, 2 KV heads of 256, a quarter of each head rotated) every fourth,
256 experts (top 8, 512 wide) plus a 512-wide shared expert, vocabulary 248,320. `--layers` keeps
the first N of its 40 layers (same 3:1 pattern), so a run fits a short device lease; bfloat16.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

FULL_LAYERS = 40
QWEN3_5_35B_A3B = {
    "model_type": "qwen3_5_moe_text", "vocab_size": 248320, "hidden_size": 2048, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "hidden_act": "silu", "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "attention_bias": False,
    "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25, "rope_type": "default"},
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "num_experts_per_tok": 8, "num_experts": 256,
    "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "initializer_range": 0.02, "dtype": "bfloat16",
}


def config(layers: int) -> dict:
    types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)]
    return {**QWEN3_5_35B_A3B, "num_hidden_layers": layers, "layer_types": types,
            "architectures": ["Qwen3_5MoeForCausalLM"]}


def main() -> int:
    from bringup.core.bench.throughput import BenchSettings, parse_range, run_bench

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--layers", type=int, default=8, help=f"first N of the {FULL_LAYERS} layers")
    ap.add_argument("--num-seqs", type=int, default=16)
    ap.add_argument("--input-len", default="64:256")
    ap.add_argument("--output-len", default="32:64")
    ap.add_argument("--max-running-requests", type=int, default=16)
    ap.add_argument("--json", help="write the result here too")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="qwen3_5_dummy_"))
    (folder / "config.json").write_text(json.dumps(config(args.layers)))
    settings = BenchSettings(source=str(folder), device=args.device, dtype="bfloat16", num_seqs=args.num_seqs,
                             input_len=parse_range(args.input_len, "--input-len"),
                             output_len=parse_range(args.output_len, "--output-len"),
                             max_running_requests=args.max_running_requests, load_format="dummy",
                             baseline="transformers")
    result = run_bench(settings, log=lambda m: print(m, flush=True))
    out = result.to_json()
    out.update(shape="Qwen3.5-35B-A3B text decoder", layers=args.layers, full_layers=FULL_LAYERS)
    print(f"\n| model | device | seqs | in:out | engine tok/s | transformers tok/s | ratio |\n|---|---|---|---|---|---|---|\n"
          f"| Qwen3.5-35B-A3B shape, {args.layers}/{FULL_LAYERS} layers, bf16, dummy | {args.device} | {args.num_seqs} "
          f"| {args.input_len} : {args.output_len} | {out['engine_tok_s']} | {out['baseline_tok_s']} | {out['ratio']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
