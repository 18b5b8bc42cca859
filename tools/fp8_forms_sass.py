#!/usr/bin/env python3
"""Each fp8 decode form's machine code for sm_90 at Nano's shapes, on any machine (no GPU).

    PYTHONPATH=<site with triton> python tools/fp8_forms_sass.py [--json OUT.json]

For every form of the dense W8A16 GEMV (kernels/triton/fp8_decode_forms.py) and its candidate tiles,
at 1, 2, 4 and 8 rows where the form takes them (at Nano's mamba out_proj, 2688 x 4096: the K loop
is the same code at its other shapes, whole K tiles all): the registers a thread and shared memory a program
take, how many programs an SM then holds, the K loop's instructions and the weight bytes a thread
reads per K step, and two estimates from those: the issue ceiling (4 schedulers each issuing one warp
instruction a cycle: 128 x bytes per thread / loop instructions, in bytes per cycle per SM; the H200
needs about 4.3e12 / 132 / 1.98e9 = 16.5 to read at its copy bandwidth) and the conversion-unit
instructions per weight (F2F/F2FP, which Hopper issues at a quarter of the FMA rate or less). These
say which forms can reach the bandwidth limit and which cannot (too many instructions per byte, or
too few programs to keep loads in flight); only bench/fp8_kernels.py on the device says which is
fastest. Compiled with Triton's own passes, ptxas and cuobjdump (core/bench/compiled_loads.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NEEDED = 4.3e12 / 132 / 1.98e9  # bytes per cycle per SM at the H200's copy bandwidth, boost clock
N, K = 2688, 4096


def measure(form: str, rows: int, config, N: int, K: int) -> dict:
    from bringup.core.bench.compiled_loads import assemble, compile_to_ptx, programs_per_sm, sass_count
    from bringup.kernels.triton import fp8_linear as dense
    from bringup.kernels.triton.fp8_decode_forms import FORM_CODE

    args = dict(x_ptr="*bf16", w_ptr="*fp8e4nv", s_ptr="*fp32", b_ptr="*bf16", out_ptr="*bf16", part_ptr="*fp32",
                count_ptr="*i32", M=rows, N=N, K=K, K_SPLIT=K // 4, s_xm=K, s_wn=K, s_sn=-(-K // 128), s_sk=1, s_om=N)
    metadata: dict = {}
    ptx = compile_to_ptx(dense._gemv_kernel, args, dict(
        BN=128, BK=128, HAS_BIAS=False, SPLIT=True, FORM=FORM_CODE[form], DOT_F32=False, TILE_SCALE=True,
        EVEN_K=K % config.block_k == 0, BLOCK_M=dense._block_m(form, rows), BLOCK_N=config.block_n,
        BLOCK_K=config.block_k), config.warps, config.stages, metadata=metadata)
    code = assemble(ptx)
    per_thread = config.block_n * config.block_k // (32 * config.warps)
    instructions = sum(code.loop.values())
    return {"form": form, "rows": rows, "tile": f"{config.block_n}x{config.block_k}", "warps": config.warps,
            "stages": config.stages, "registers": code.registers, "spill_bytes": code.spill_bytes,
            "shared": metadata["shared"], "programs_per_sm": programs_per_sm(code.registers, metadata["shared"],
                                                                             config.warps),
            "loop_instructions": instructions, "weight_bytes_per_thread": per_thread,
            "issue_ceiling": 4 * 32 * per_thread / instructions,
            "conversions_per_weight": sass_count(code.loop, "F2F") / per_thread,
            "wide_weight_reads": sass_count(code.loop, "LDG.E.128") + sass_count(code.loop, "LDGSTS")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from bringup.kernels.triton import fp8_linear as dense
    from bringup.kernels.triton.fp8_decode_forms import FORMS, dense_runs

    out = []
    print(f"issue ceiling: bytes/cycle/SM the K loop's instructions allow (the H200 needs ~{NEEDED:.1f})")
    print(f"{'form':<10}{'rows':>4}{'tile':>9}{'warps':>6}{'st':>3}{'regs':>5}{'smem':>7}{'prog/SM':>8}"
          f"{'loop':>6}{'B/thr':>6}{'ceiling':>8}{'conv/w':>7}")
    for form in FORMS:
        # (the matrix-unit forms pad every row count to 16: the same code at 2 to 16 rows)
        for rows in (1, 2, 4, 8) if form in ("vec", "rows") else (1, 8):
            if not dense_runs(form, rows):
                continue
            # (tiles that differ only in programs_per_unit, the split-K target, compile alike)
            for config in {c[1:5]: c for c in dense.CONFIGS[form]}.values():
                r = measure(form, rows, config, N, K)
                out.append(r)
                print(f"{form:<10}{rows:>4}{r['tile']:>9}{r['warps']:>6}{r['stages']:>3}{r['registers']:>5}"
                      f"{r['shared']:>7}{r['programs_per_sm']:>8}{r['loop_instructions']:>6}"
                      f"{r['weight_bytes_per_thread']:>6}{r['issue_ceiling']:>8.1f}{r['conversions_per_weight']:>7.2f}"
                      + ("  SPILLS" if r["spill_bytes"] else ""))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
