"""Qwen3-Next and Kimi-Linear with the GPU's delta-rule kernels (kernels/triton/delta_rule_decode.py,
delta_rule_gates.py, run on the CPU under Triton's interpreter; the rest of the model the CPU's) against
transformers on the tiny checkpoints of test_models_qwen3_next.py and test_models_kimi_linear.py: the
logits of batched, chunked, staggered requests (one-token chunks and decode steps take the decode
kernel, every forward the gates kernel) as close as the references' (float32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_interpreter import assert_interpreted_ok

pytestmark = pytest.mark.slow  # builds two engines in a child

_SCRIPT = """
import sys
import torch
sys.path[:0] = sys.argv[1:]  # tests/helpers, and this folder (the tiny configs)
import transformers
from bringup.kernels import dispatch
from bringup.kernels.triton import delta_rule_decode, delta_rule_gates
for op, fn in [("gated_delta_rule_recurrent_inplace", delta_rule_decode.gated_delta_rule_recurrent_inplace),
               ("kda_recurrent_inplace", delta_rule_decode.kda_recurrent_inplace),
               ("delta_rule_gates", delta_rule_gates.delta_rule_gates)]:
    dispatch.register(op, "cpu", fn, name="triton")  # (before the CPU's own ops load: these stay)
from bringup.core.engine.loader import load_model
from models_helpers import Req, assert_matches_hf, randomize, run_engine, standard_requests
from tiny_family_configs import tiny_kimi_config
from test_models_qwen3_next import BASE, MOE
import tempfile
torch.manual_seed(0)
qwen = transformers.Qwen3NextForCausalLM(transformers.Qwen3NextConfig(
    **BASE, intermediate_size=64, decoder_sparse_step=2, partial_rotary_factor=0.5, **MOE)).eval()
randomize(qwen, seed=1)
kimi = transformers.KimiLinearForCausalLM(tiny_kimi_config()).eval()
randomize(kimi, seed=3)
with torch.no_grad():  # decays in Kimi's trained range, as test_models_kimi_linear.py
    for layer in kimi.model.layers:
        gate = getattr(layer.self_attn, "forget_gate", None)
        if gate is not None:
            gate.A_log.copy_(torch.linspace(-1.0, 1.0, gate.A_log.numel()).view_as(gate.A_log))
for hf in (qwen, kimi):
    folder = tempfile.mkdtemp()
    hf.save_pretrained(folder)
    model = load_model(folder).model
    names = {n: model.ops.implementations[n] for n in ("delta_rule_gates", "gated_delta_rule_recurrent_inplace",
                                                      "kda_recurrent_inplace")}
    assert set(names.values()) == {"triton"}, names
    requests = standard_requests(96) + [Req(list(range(3, 13)), [5, 1, 4], steps=3)]  # a one-token chunk
    worst = assert_matches_hf(hf, run_engine(model, requests), atol=2e-4)  # the references' own tolerance
    print(type(hf).__name__, f"{worst:.1e}")
print("ok")
"""


def test_qwen3_next_and_kimi_linear_with_the_triton_delta_rule_kernels_match_transformers():
    pytest.importorskip("transformers")
    helpers = Path(__file__).resolve().parents[3] / "helpers"
    models_tests = Path(__file__).resolve().parent
    assert_interpreted_ok(_SCRIPT, str(helpers), str(models_tests), timeout=600)
