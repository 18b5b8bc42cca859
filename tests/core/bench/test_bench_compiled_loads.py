"""core/bench/compiled_loads.py on gpt-oss's gated up GEMM and GEMV (kernels/triton/gate_up_layout.py):
compiled for sm_90 without a GPU, the interleaved gate/up read through its two stride-2 views loads
every weight element on its own (2-byte loads), read as one tensor it streams 16-byte copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

def _compile_probe(script: str):
    """Run a probe that compiles kernels for sm_90 (interpreter off) and prints JSON as its last line."""
    pytest.importorskip("triton")
    pytest.importorskip("triton.backends.nvidia.compiler")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_PROBE = """
import json
from bringup.core.bench.compiled_loads import compile_to_ptx, load_kinds, narrow_loads, wide_loads
from bringup.kernels.triton import fused_moe_gated, moe_gated_gemv
E, H, I, bf = 32, 2880, 2880, "*bf16"
views = dict(g_ptr=bf, u_ptr=bf, gb_ptr=bf, ub_ptr=bf, out_ptr=bf, x_ptr=bf, N=I, K=H, alpha=1.7, limit=7.0,
             s_xm=H, s_xk=1, s_ge=H * 2 * I, s_gn=2, s_gk=2 * I, s_ue=H * 2 * I, s_un=2, s_uk=2 * I,
             s_gbe=2 * I, s_gbn=2, s_ube=2 * I, s_ubn=2, s_om=I, s_on=1)
act = dict(ACT=1, HAS_BIAS=True, HAS_LIMIT=True)
out = {}
for as_one in (False, True):
    gemm = compile_to_ptx(fused_moe_gated._gated_up_kernel,
                          dict(views, sorted_ptr="*i32", block_expert_ptr="*i32", num_assignments=128, rows_per_token=4),
                          dict(act, INTERLEAVED=as_one, BLOCK_M=16, BLOCK_N=64, BLOCK_K=128), 4, 3)
    gemv = compile_to_ptx(moe_gated_gemv._gated_gemv_kernel, dict(views, ids_ptr="*i64"),
                          dict(act, TOP_K=4, INTERLEAVED=as_one, BLOCK_N=64, BLOCK_K=64), 4)
    out[str(as_one)] = {name: [narrow_loads(load_kinds(p)), wide_loads(load_kinds(p))]
                        for name, p in (("gemm", gemm), ("gemv", gemv))}
print(json.dumps(out))
"""


def test_interleaved_gate_up_read_as_one_tensor_compiles_to_wide_loads():
    loads = _compile_probe(_PROBE)
    # per K step a thread of 4 warps reads 128 x 128 (GEMM) and 64 x 128 (GEMV) weight elements / 128 threads
    per_thread = {"gemm": 128 * 128 // 128, "gemv": 64 * 128 // 128}
    for name, elements in per_thread.items():
        strided_narrow, strided_wide = loads["False"][name]
        one_narrow, one_wide = loads["True"][name]
        assert strided_narrow >= elements, (name, loads)  # one 2-byte load per weight element
        # every weight element in a 16-byte load (8 bf16 each); the 2-byte ones left read x and the biases
        assert one_wide * 8 >= elements and one_narrow * 4 <= strided_narrow, (name, loads)


_SPLIT_PROBE = """
import json
from bringup.core.bench.compiled_loads import compile_to_ptx, load_kinds, narrow_loads, wide_loads
from bringup.kernels.triton import moe_gated_split as ms
E, H, I, bf = 32, 2880, 2880, "*bf16"
up = dict(g_ptr=bf, u_ptr=bf, gb_ptr=bf, ub_ptr=bf, out_ptr=bf, x_ptr=bf, ids_ptr="*i64", count_ptr="*i32", n=4,
          N=I, K=H, rows_per_token=4, alpha=1.7, limit=7.0, s_xm=H, s_xk=1, s_ge=H * 2 * I, s_gn=2, s_gk=2 * I,
          s_ue=H * 2 * I, s_un=2, s_uk=2 * I, s_gbe=2 * I, s_gbn=2, s_ube=2 * I, s_ubn=2, s_om=I, s_on=1)
down = dict(h_ptr=bf, w_ptr=bf, b_ptr=bf, out_ptr=bf, part_ptr="*fp32", count_ptr="*i32", ids_ptr="*i64",
            weights_ptr="*fp32", n=4, N=H, K=I, k_chunk=768, s_hm=I, s_hk=1, s_we=I * H, s_wn=1, s_wk=H, s_be=H,
            s_bn=1, s_om=H, s_on=1)
# Kimi-Linear / SwiGLU: separate gate and up, K contiguous
kimi = dict(up, s_ge=I * H, s_gn=H, s_gk=1, s_ue=I * H, s_un=H, s_uk=1, s_gbe=I, s_gbn=1, s_ube=I, s_ubn=1)
rows = dict(N_POW2=16, COUNTERS=64, BLOCK_M=ms.BLOCK_M)
out = {}
for name, kernel, args, consts, (bn, bk, warps, stages) in (
        ("up", ms._split_gated_up_kernel, up, dict(ACT=1, HAS_BIAS=True, HAS_LIMIT=True, INTERLEAVED=True),
         ms.TILE["up"]),
        ("up_separate", ms._split_gated_up_kernel, kimi, dict(ACT=0, HAS_BIAS=False, HAS_LIMIT=False,
                                                             INTERLEAVED=False), ms.TILE["up"]),
        ("down", ms._split_down_kernel, down, dict(HAS_BIAS=True, SPLIT_K=4), ms.TILE["down"])):
    kinds = load_kinds(compile_to_ptx(kernel, args, dict(consts, **rows, BLOCK_N=bn, BLOCK_K=bk), warps, stages))
    tile = bk * bn * (2 if name.startswith("up") else 1)  # weight elements per K step (gate and up for the up)
    out[name] = [narrow_loads(kinds), wide_loads(kinds), tile // (32 * warps), stages]
print(json.dumps(out))
"""


def test_split_gated_moe_streams_its_weights_in_16_byte_copies():
    """The split form's three weight reads (interleaved gate/up, separate gate and up, down), compiled for
    sm_90: each thread's share of a weight tile arrives in 16-byte copies (8 bf16), one set per pipeline
    stage, and no weight element is a 2-byte load: the few narrow loads left read the biases, far fewer
    than a thread's weight elements per K step (a weight read element by element has one each)."""
    loads = _compile_probe(_SPLIT_PROBE)
    for name, (narrow, wide, elements_per_thread, stages) in loads.items():
        assert wide * 8 >= elements_per_thread * stages, (name, loads)
        assert narrow * 8 <= elements_per_thread, (name, loads)


_FP8_PROBE = """
import json
from bringup.core.bench.compiled_loads import assemble, compile_to_ptx, sass_count
from bringup.kernels.triton import fp8_linear as d, fused_moe_fp8 as m
from bringup.kernels.triton.fp8_decode_forms import FORM_CODE
N, K, BN, BK = 2688, 4096, 64, 128  # Nano's mamba out_proj, the engine's first tile
dense = dict(x_ptr="*bf16", w_ptr="*fp8e4nv", s_ptr="*fp32", b_ptr="*bf16", out_ptr="*bf16", part_ptr="*fp32",
             count_ptr="*i32", M=2, N=N, K=K, K_SPLIT=K // 4, s_xm=K, s_wn=K, s_sn=K // 128, s_sk=1, s_om=N)
E, I, H = 128, 1856, 2688  # Nano's experts, the up launch with the shared expert's slices
moe = dict(x_ptr="*bf16", w_ptr="*fp8e4nv", s_ptr="*fp32", sw_ptr="*fp8e4nv", ss_ptr="*fp32", out_ptr="*bf16",
           ids_ptr="*i64", weights_ptr="*fp32", T=2, N=I, K=H, s_xm=H, s_we=I * H, s_wn=H, s_se=15 * 21, s_sn=21,
           s_sk=1, s_swn=H, s_ssn=21, s_ssk=1, s_om=I)
out = {}
for form, rows, stages in (("dot", 16, 4), ("dot_trunc", 16, 4), ("mma", 16, 4), ("vec", 1, 4), ("rows", 1, 1),
                           ("rows", 2, 1)):
    a = assemble(compile_to_ptx(d._gemv_kernel, dense, dict(
        BN=128, BK=128, HAS_BIAS=False, SPLIT=True, FORM=FORM_CODE[form], DOT_F32=False, TILE_SCALE=True, EVEN_K=True,
        BLOCK_M=rows, BLOCK_N=BN, BLOCK_K=BK), 4, stages))
    out[f"dense {form} {rows}"] = dict(registers=a.registers, spills=a.spill_bytes, loop=dict(a.loop))
for form, rows, stages in (("dot", 16, 4), ("dot_trunc", 16, 4), ("mma", 16, 4), ("vec", 1, 4), ("rows", 2, 1)):
    a = assemble(compile_to_ptx(m._gemv_kernel, moe, dict(
        TOP_K=6, SLOTS=8, X_PER_TOKEN=True, SHARED_ALONG_K=False, ACT=1, HAS_WEIGHTS=False, BN=128, BK=128,
        FORM=FORM_CODE[form], DOT_F32=False, EVEN_K=True, BLOCK_M=rows, BLOCK_N=BN, BLOCK_K=BK), 4, stages))
    out[f"moe {form} {rows}"] = dict(registers=a.registers, spills=a.spill_bytes, loop=dict(a.loop))
print(json.dumps(out))
"""

# Per K step of a BN x BK fp8 tile over 4 warps: each thread's share of the weights, in bytes.
_WEIGHT_BYTES = 64 * 128 // 128
# Conversion-unit instructions that widen fp8 (F2FP: packs and unpacks, F2F: one value each).
_CONVERSIONS = ("F2FP", "F2F.")


def _count(loop: dict, *prefixes: str) -> int:
    return sum(n for op, n in loop.items() if op.startswith(prefixes))


def test_fp8_gemv_forms_read_weights_wide_and_widen_them_cheaply():
    """The fp8 GEMVs' forms (kernels/triton/fp8_decode_forms.py), compiled for sm_90 at Nano's shapes:
    - every form, dense and MoE, reads each thread's share of a weight tile in 16-byte loads or
      cp.async copies of 8 or 16, never a byte at a time (a version of the MoE kernel that chose each
      column's routed or shared weight row in an `if` loaded every form's weights with LDG.E.U8), and
      nothing spills;
    - "dot_trunc" and "mma" widen the weights with a third of "dot"'s conversion instructions
      (through float32, kernels/triton/fp8_widen.py), and "mma" (x @ w^T) takes them in 16-byte
      copies where "dot" (w @ x^T, the wgmma operand) takes 8-byte ones;
    - "rows" at one row: no shuffle in the K loop and fewer registers than "vec" (more programs
      resident: the bytes in flight), at two rows one FFMA per weight and row."""
    got = _compile_probe(_FP8_PROBE)
    for name, r in got.items():
        loop = r["loop"]
        assert r["spills"] == 0, (name, r)
        assert _count(loop, "LDG.E.U8", "LDG.E.S8") == 0, (name, loop)  # no weight read a byte at a time
        wide = 16 * _count(loop, "LDG.E.128", "LDGSTS.E.BYPASS.128") + 8 * _count(loop, "LDGSTS.E.64")
        assert wide >= _WEIGHT_BYTES, (name, loop)
    for kind in ("dense", "moe"):
        dot, mma = got[f"{kind} dot 16"]["loop"], got[f"{kind} mma 16"]["loop"]
        assert _count(mma, "LDGSTS.E.BYPASS.128") * 16 >= _WEIGHT_BYTES and _count(mma, "LDGSTS.E.64") == 0, (kind, mma)
        assert _count(dot, "LDGSTS.E.64") * 8 >= _WEIGHT_BYTES, (kind, dot)  # (what "dot" does: if this fails, look again)
        for cheap in (mma, got[f"{kind} dot_trunc 16"]["loop"]):
            assert 3 * _count(cheap, *_CONVERSIONS) <= _count(dot, *_CONVERSIONS), (kind, dot, cheap)
    one, vec, two = got["dense rows 1"], got["dense vec 1"], got["dense rows 2"]
    assert _count(one["loop"], "SHFL") == 0 and one["registers"] < vec["registers"], (one, vec)
    assert _count(two["loop"], "FFMA") == 2 * _WEIGHT_BYTES and _count(two["loop"], "SHFL") == 0, two
