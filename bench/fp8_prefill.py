"""FP8 prefill linears: W8A8 (fp8 activations on the FP8 matrix units) against W8A16 and bf16, in one run.

    python bench/fp8_prefill.py [CONFIG.json] [--rows 512 2048] [--block 128] [--json OUT.json]

CONFIG defaults to Nemotron-3-Nano-30B-A3B's (../shared/models). Per dense linear of the model
(Mamba in/out projections, attention qkv and o), at prefill row counts: torch's bf16 linear, the
W8A16 GEMM (kernels/triton/fp8_linear.py: fp8 weights widened in registers, bf16 dots), and W8A8
(kernels/triton/fp8_w8a8.py: the activations quantised per token and 128-group, then fp8 x fp8
dots), whole and split into its two launches; each in microseconds per call (50 calls replayed
from a CUDA graph, cycling over copies of the weights that read twice the L2 cache, as
bench/fp8_kernels.py does), with TFLOP/s and the ratio to bf16 measured in the same run. The last
column: W8A8's relative (Frobenius) error against the bf16 product on the same dequantised weights
(fp8 activations cost about 2.65%: tests/kernels/test_kernels_fp8_w8a8.py says why). After the
table, the W8A8 GEMM tiles TilePicker timed per shape.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fp8_kernels import NANO, copies_beyond_l2, graphed_us, linear_shapes, print_tile_times, tile_json  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", type=Path, default=NANO)
    ap.add_argument("--rows", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from bringup.kernels.reference.fp8_linear import dequantize_fp8_block, quantize_fp8_block
    from bringup.kernels.triton import fp8_w8a8 as w8a8
    from bringup.kernels.triton.availability import w8a8_reason
    from bringup.kernels.triton.fp8_linear import fp8_linear as w8a16_linear

    if w8a8_reason("cuda") is not None:
        print(f"W8A8 does not run here: {w8a8_reason('cuda')}")
        return 1
    cfg = json.loads(args.config.read_text())
    dev, bf16, block = torch.device("cuda"), torch.bfloat16, (args.block, args.block)
    gen = torch.Generator(device=dev).manual_seed(0)
    print(f"{torch.cuda.get_device_name(dev)}; us per call, {50} calls in a CUDA graph; x: ratio to bf16 (above 1: faster)")
    head = (f"{'layer':<16}{'rows':>6}{'N':>7}{'K':>6}{'bf16 us':>9}{'TFLOP/s':>9}{'W8A16 us':>10}{'x':>6}"
            f"{'W8A8 us':>9}{'TFLOP/s':>9}{'x':>6}{'quant us':>10}{'GEMM us':>9}{'x':>6}{'W8A8 err':>10}")
    print(head)
    rows_out = []
    for name, (N, K) in linear_shapes(cfg).items():
        copies = []
        for _ in range(copies_beyond_l2(N * K, dev)):
            w = torch.randn(N, K, device=dev, generator=gen) * 0.02
            wq, ws = quantize_fp8_block(w, block)
            copies.append((dequantize_fp8_block(wq, ws, block, bf16), wq, ws))  # bf16 on the same (rounded) weights
            del w
        for m in args.rows:
            x = torch.randn(m, K, device=dev, generator=gen).to(bf16)
            xq, xs = w8a8.quantize_activations(x)
            out = torch.empty(m, N, device=dev, dtype=bf16)
            t_bf16 = graphed_us([lambda wb=wb: F.linear(x, wb) for wb, _, _ in copies])
            t_w8a16 = graphed_us([lambda wq=wq, s=s: w8a16_linear(x, wq, s, block) for _, wq, s in copies])
            t_w8a8 = graphed_us([lambda wq=wq, s=s: w8a8.w8a8_linear(x, wq, s, block) for _, wq, s in copies])
            t_quant = graphed_us([lambda: w8a8.quantize_activations(x)])
            t_gemm = graphed_us([lambda wq=wq, s=s: w8a8.w8a8_gemm(xq, xs, wq, s, block, None, out)
                                 for _, wq, s in copies])
            wb, wq, ws = copies[0]
            want = F.linear(x.float(), wb.float())
            err = ((w8a8.w8a8_linear(x, wq, ws, block).float() - want).norm() / want.norm()).item()
            flops = 2 * m * N * K
            print(f"{name:<16}{m:>6}{N:>7}{K:>6}{t_bf16:>9.1f}{flops / t_bf16 / 1e6:>9.0f}{t_w8a16:>10.1f}"
                  f"{t_bf16 / t_w8a16:>6.2f}{t_w8a8:>9.1f}{flops / t_w8a8 / 1e6:>9.0f}{t_bf16 / t_w8a8:>6.2f}"
                  f"{t_quant:>10.1f}{t_gemm:>9.1f}{t_bf16 / t_gemm:>6.2f}{err:>10.2%}")
            rows_out.append({"layer": name, "rows": m, "N": N, "K": K, "bf16_us": t_bf16, "w8a16_us": t_w8a16,
                             "w8a8_us": t_w8a8, "w8a8_quant_us": t_quant, "w8a8_gemm_us": t_gemm, "w8a8_rel_err": err})
        del copies
    print_tile_times(w8a8.PICKER, ("N", "K", "rows bucket", "", "", "", ""))
    print(f"\npicking tiles took {w8a8.PICKER.seconds:.1f} s (compiles included)")
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(dev), "rows": rows_out,
                                         "tiles": tile_json(w8a8.PICKER)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
