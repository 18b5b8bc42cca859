"""oneDNN's packed weight copies on the CPU (kernels/cpu/onednn_packed.py) and the MoE's dense form
over them (kernels/cpu/moe.py): the same products as F.linear and the references, a copy made
again when its weight changes, and none for tensors that are not parameters."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bringup.kernels.reference as ref
from bringup.kernels.cpu import linear as cpu_linear
from bringup.kernels.cpu import moe as cpu_moe
from bringup.kernels.cpu import onednn_packed
from bringup.kernels.reference.moe_shared import moe_experts_shared as ref_moe_shared

pytestmark = pytest.mark.skipif(not onednn_packed.USABLE, reason="this torch build has no oneDNN")


def close(a, b, tol=1e-5):
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def param(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t, requires_grad=False)


@pytest.mark.parametrize("rows", [1, onednn_packed.PACKED_MIN_ROWS, 8, 40])
def test_a_parameter_multiplies_through_its_packed_copy_from_a_few_rows(rows):
    g = torch.Generator().manual_seed(rows)
    x, b = torch.randn(rows, 24, generator=g), torch.randn(40, generator=g)
    w = param(torch.randn(40, 24, generator=g).t().contiguous().t())  # the CPU engine's layout
    close(cpu_linear.linear(x, w, b), F.linear(x, w, b))
    assert (onednn_packed.packed_bytes(nn.ParameterList([w])) > 0) == (rows >= onednn_packed.PACKED_MIN_ROWS)


def test_a_weight_changed_in_place_or_replaced_gets_a_new_copy():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=g)
    layer = nn.Linear(16, 12, bias=False).requires_grad_(False)
    close(cpu_linear.linear(x, layer.weight), F.linear(x, layer.weight))
    first = onednn_packed.packed_weight(layer.weight)
    layer.weight.mul_(3)
    close(cpu_linear.linear(x, layer.weight), F.linear(x, layer.weight))
    layer.weight.data = torch.randn(12, 16, generator=g)
    close(cpu_linear.linear(x, layer.weight), F.linear(x, layer.weight))
    assert onednn_packed.packed_weight(layer.weight) is not first
    assert onednn_packed.packed_bytes(layer) == 12 * 16 * 4  # one copy kept, the stale ones dropped


def test_plain_tensors_and_inference_tensors_keep_no_copy():
    x, w = torch.randn(8, 16), torch.randn(12, 16)
    close(cpu_linear.linear(x, w), F.linear(x, w))
    assert not onednn_packed.wanted(x, w) and "_bringup_onednn_packs" not in w.__dict__
    with torch.inference_mode():
        p = param(torch.randn(12, 16))
        assert not onednn_packed.wanted(x, p)
        close(cpu_linear.linear(x, p), F.linear(x, p))
    assert not onednn_packed.wanted(x.bfloat16(), param(w.bfloat16()))


def _moe(g, E=4, I=8, H=16, S=16, gated=False):
    lay = lambda t: param(t.transpose(-1, -2).contiguous().transpose(-1, -2))  # noqa: E731 (the engine's layout)
    up, down = lay(torch.randn(E, I, H, generator=g)), lay(torch.randn(E, H, I, generator=g))
    gate = lay(torch.randn(E, I, H, generator=g)) if gated else None
    shared_up, shared_down = lay(torch.randn(S, H, generator=g)), lay(torch.randn(H, S, generator=g))
    return up, down, gate, shared_up, shared_down


@pytest.mark.parametrize("T", [1, 6, 40])
@pytest.mark.parametrize("gated", [False, True])
def test_dense_experts_over_packed_stacks_equal_the_reference(T, gated):
    g = torch.Generator().manual_seed(T)
    up, down, gate, _, _ = _moe(g, gated=gated)
    act = "silu" if gated else "relu2"
    x, weights = torch.randn(T, 16, generator=g), torch.rand(T, 2, generator=g)
    ids = torch.stack([torch.randperm(4, generator=g)[:2] for _ in range(T)])
    ids[:, 0] = 1  # every token picks expert 1
    expected = ref.moe_experts(x, weights, ids, up, down, gate, act)
    close(cpu_moe.moe_experts(x, weights, ids, up, down, gate, act, strategy="dense"), expected, 1e-4)
    # the dense form took packed copies from a few rows (a lone token keeps the plain stacks)
    assert ("_bringup_onednn_packs" in up.__dict__) == (T >= onednn_packed.PACKED_MIN_ROWS)
    down.mul_(0.5)
    close(cpu_moe.moe_experts(x, weights, ids, up, down, gate, act, strategy="dense"),
          ref.moe_experts(x, weights, ids, up, down, gate, act), 1e-4)


@pytest.mark.parametrize("T", [1, 2, 6, 40])
def test_shared_and_routed_experts_together_equal_the_reference(T):
    g = torch.Generator().manual_seed(10 + T)
    up, down, _, shared_up, shared_down = _moe(g)
    x, weights = torch.randn(T, 16, generator=g), torch.rand(T, 2, generator=g)
    ids = torch.stack([torch.randperm(4, generator=g)[:2] for _ in range(T)])
    args = (x, weights, ids, up, down, shared_up, shared_down, "relu2")
    close(cpu_moe.moe_experts_shared(*args), ref_moe_shared(*args), 1e-4)
    # Only the dense widths (from 3 tokens, here, up to 64) pack the experts with the shared expert appended.
    assert ("moe_dense_shared" in up.__dict__.get("_bringup_onednn_packs", {})) == (T in (6, 40))
    shared_up.mul_(-1)
    close(cpu_moe.moe_experts_shared(*args), ref_moe_shared(*args), 1e-4)


def test_with_the_shared_expert_appended_the_dense_form_takes_short_prompts_too():
    f32 = torch.float32
    assert cpu_moe.moe_form(48, 2, 8, f32, packed=True) == "dense" and cpu_moe.moe_form(48, 2, 8, f32) == "sorted"
    assert cpu_moe.moe_form(65, 2, 8, f32, packed=True) == "sorted"
    # with many experts per pick, every expert on every token would be far more arithmetic: 32 at most
    assert cpu_moe.moe_form(32, 6, 128, f32, packed=True) == "dense"
    assert cpu_moe.moe_form(48, 6, 128, f32, packed=True) == "sorted"
