"""q/k/v as one GEMM (core/engine/models/fused_qkv.py): the fused product equals the three, the model
holds the weights once (each projection a slice of the fused weight), a later in-place copy into a
projection reaches the fused weight, a replaced one is fused again; and tiny Llama, Gemma 3 and
gpt-oss checkpoints give transformers' greedy tokens with it forced on."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.models.fused_qkv import FusedQKV
from bringup.core.engine.sampling import SamplingParams

from engine_helpers import hf_greedy, prompts_of_lengths, tiny_llama, tiny_sliding


class _Attn(FusedQKV, nn.Module):
    def __init__(self, bias: bool):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = 4, 2, 3
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(10, n, bias=bias).requires_grad_(False) for n in (12, 6, 6))


@pytest.mark.parametrize("bias", [True, False])
def test_fused_projection_equals_three_and_shares_the_weights(bias):
    torch.manual_seed(0)
    m, x = _Attn(bias), torch.randn(5, 10)
    m.fuse_qkv = False
    plain = m.project_qkv(x)
    m.fuse_qkv = True
    fused = m.project_qkv(x)
    for a, b in zip(plain, fused):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b)
    base = m._qkv.data_ptr()
    step = m._qkv.element_size() * 10
    assert [p.weight.data_ptr() for p in (m.q_proj, m.k_proj, m.v_proj)] == [base, base + 12 * step, base + 18 * step]
    with torch.no_grad():
        m.k_proj.weight.mul_(2)  # in place: the fused weight sees it
    assert torch.equal(m._qkv[12:18], m.k_proj.weight)
    torch.testing.assert_close(m.project_qkv(x)[1].reshape(5, 6), m.k_proj(x))
    m.v_proj.weight.data = torch.zeros(6, 10)  # replaced: fused again
    torch.testing.assert_close(m.project_qkv(x)[2].reshape(5, 6), m.v_proj(x))
    assert not m.project_qkv(x)[2].any() or bias
    assert m.v_proj.weight.data_ptr() == m._qkv.data_ptr() + 18 * step


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "gemma3_text", "gpt_oss"])
def test_families_with_fused_qkv_give_transformers_tokens(family, tmp_path, monkeypatch):
    folder = tiny_llama(tmp_path / "ckpt") if family == "llama" else tiny_sliding(tmp_path / "ckpt", family)
    prompts = prompts_of_lengths([3, 17, 9], 400, seed=5)
    expected = hf_greedy(folder, prompts, 5)
    monkeypatch.setattr(FusedQKV, "fuse_qkv", True)
    engine = Engine(EngineConfig(str(folder), device="cpu", chunked_prefill_size=16), log=lambda m: None)
    assert engine.generate(prompts, SamplingParams(max_new_tokens=5, temperature=0, ignore_eos=True)) == expected
    fused = [m for m in engine.model.modules() if isinstance(m, FusedQKV)]
    assert fused and all(getattr(m, "_qkv", None) is not None for m in fused)
