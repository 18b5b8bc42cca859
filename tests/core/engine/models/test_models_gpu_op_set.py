"""Tiny float32 dummy Qwen3-Next, Kimi-Linear and LFM2 give the same greedy tokens and logprobs (4 decimals)
with the GPU's op set (Triton kernels under the interpreter, stacked q/k/v and gate/up, the decode
fusions) as with the reference op set: bench/gpu_ops_equivalence.py in a child process."""

from __future__ import annotations

import pytest
from repo_paths import REPO, SHARED_MODELS
from triton_interpreter import assert_interpreted_ok


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_MODELS / "Qwen__Qwen3-Next-80B-A3B-Instruct.json").exists(),
                    reason="the shared model configs are not beside the checkout")
def test_gpu_op_set_gives_the_reference_tokens_and_logprobs():
    script = REPO / "bench" / "gpu_ops_equivalence.py"
    assert_interpreted_ok(f"import runpy, sys; sys.argv = [{str(script)!r}]; runpy.run_path(sys.argv[0], run_name='__main__')")
