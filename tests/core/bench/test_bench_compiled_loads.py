"""core/bench/compiled_loads.py on gpt-oss's gated up GEMM and GEMV (kernels/triton/gate_up_layout.py):
compiled for sm_90 without a GPU, the interleaved gate/up read through its two stride-2 views loads
every weight element on its own (2-byte loads), read as one tensor it streams 16-byte copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

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
    pytest.importorskip("triton")
    pytest.importorskip("triton.backends.nvidia.compiler")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    loads = json.loads(done.stdout.strip().splitlines()[-1])
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
    pytest.importorskip("triton")
    pytest.importorskip("triton.backends.nvidia.compiler")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", _SPLIT_PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    loads = json.loads(done.stdout.strip().splitlines()[-1])
    for name, (narrow, wide, elements_per_thread, stages) in loads.items():
        assert wide * 8 >= elements_per_thread * stages, (name, loads)
        assert narrow * 8 <= elements_per_thread, (name, loads)
