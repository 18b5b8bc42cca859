"""The sync-free kernel forms: in-place decode steps on a state pool equal the gather/step/scatter
of the plain ops, and the three MoE forms (sorted, gather, dense) give the same sums."""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F

import bringup.kernels.reference as ref
from bringup.kernels import dispatch

moe_module = importlib.import_module("bringup.kernels.reference.moe_experts")


def test_mamba_state_update_inplace_equals_gather_step_scatter():
    g = torch.Generator().manual_seed(0)
    H, P, N, G, slots_total = 4, 3, 5, 2, 6
    pool = torch.randn(slots_total, H, P, N, generator=g)
    slots = torch.tensor([4, 1, 3])
    args = dict(x=torch.randn(3, H, P, generator=g), dt=torch.randn(3, H, generator=g), A=-torch.rand(H, generator=g),
                B=torch.randn(3, G, N, generator=g), C=torch.randn(3, G, N, generator=g), D=torch.randn(H, generator=g),
                dt_bias=torch.randn(H, generator=g))
    original, expected_pool = pool.clone(), pool.clone()
    y_ref, new = ref.mamba_state_update(expected_pool[slots], **args)
    expected_pool[slots] = new
    y = ref.mamba_state_update_inplace(pool, slots, **args)
    assert torch.equal(y, y_ref) and torch.equal(pool, expected_pool)
    assert torch.equal(pool[[0, 2, 5]], original[[0, 2, 5]]) and not torch.equal(pool[slots], original[slots])


def test_causal_conv1d_update_inplace_equals_gather_step_scatter():
    g = torch.Generator().manual_seed(1)
    C, K = 6, 4
    pool = torch.randn(5, C, K - 1, generator=g)
    slots = torch.tensor([2, 0])
    x, w, b = torch.randn(2, C, generator=g), torch.randn(C, K, generator=g), torch.randn(C, generator=g)
    expected_pool = pool.clone()
    y_ref, new = ref.causal_conv1d_update(x, expected_pool[slots], w, b, "silu")
    expected_pool[slots] = new
    y = ref.causal_conv1d_update_inplace(x, pool, slots, w, b, "silu")
    assert torch.equal(y, y_ref) and torch.equal(pool, expected_pool)


def test_causal_conv1d_varlen_inplace_equals_gather_conv_scatter():
    """A prefill chunk of several prompts: each starts from its slot's state only where it has one
    (a fresh prompt starts from zeros whatever its slot holds) and leaves its last K-1 inputs there;
    other slots are untouched."""
    g = torch.Generator().manual_seed(2)
    C, K, starts = 6, 4, [0, 1, 3, 9]
    pool = torch.randn(5, C, K - 1, generator=g)
    slots, has = torch.tensor([3, 0, 4]), torch.tensor([True, False, True])
    x, w, b = torch.randn(9, C, generator=g), torch.randn(C, K, generator=g), torch.randn(C, generator=g)
    initial = pool[slots].clone()
    initial[1] = 0
    y_ref, final = ref.causal_conv1d_varlen(x, starts, w, b, initial, "silu")
    expected_pool = pool.clone()
    expected_pool[slots] = final
    original = pool.clone()
    y = ref.causal_conv1d_varlen_inplace(x, starts, w, b, pool, slots, has, "silu")
    assert torch.equal(y, y_ref) and torch.equal(pool, expected_pool)
    assert torch.equal(pool[[1, 2]], original[[1, 2]])
    # the one-token prompt keeps two of its slot's old inputs and adds its own
    assert torch.equal(pool[3, :, :2], original[3, :, 1:]) and torch.equal(pool[3, :, 2], x[0])


def test_cpu_ops_carry_the_reference_inplace_forms(monkeypatch):
    monkeypatch.setenv(dispatch.ENV_VAR, "reference")  # (by default the CPU runs its own: kernels/cpu)
    ops = dispatch.ops_for("cpu")
    assert ops.mamba_state_update_inplace is ref.mamba_state_update_inplace
    assert ops.implementations["causal_conv1d_update_inplace"] == "reference"


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("T", [1, 7, 40])
def test_moe_forms_give_the_same_sum(gated, T):
    g = torch.Generator().manual_seed(T)
    H, I, E, k = 8, 6, 5, 2
    x = torch.randn(T, H, generator=g)
    up, down = torch.randn(E, I, H, generator=g), torch.randn(E, H, I, generator=g)
    gate = torch.randn(E, I, H, generator=g) if gated else None
    w, ids = ref.route_softmax(torch.randn(T, E, generator=g), k)
    act = "silu" if gated else "relu2"
    dense_w = torch.zeros(T, E).scatter_add_(1, ids, w)  # the mixture written out, as a check on all three
    every = []
    for e in range(E):
        h = x @ up[e].t()
        h = F.silu(x @ gate[e].t()) * h if gated else F.relu(h) ** 2
        every.append(h @ down[e].t())
    expected = torch.einsum("te,eth->th", dense_w, torch.stack(every))
    sums = {s: ref.moe_experts(x, w, ids, up, down, gate, act, strategy=s) for s in ("sorted", "gather", "dense")}
    for s, out in sums.items():
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4, msg=f"MoE form {s}")
    torch.testing.assert_close(sums["gather"], sums["sorted"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sums["dense"], sums["sorted"], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="unknown MoE strategy"):
        ref.moe_experts(x, w, ids, up, down, gate, act, strategy="scatter")


def test_moe_strategy_is_chosen_from_shapes_and_device():
    pick = moe_module.moe_strategy
    assert pick(1, 6, 128, "cpu") == "sorted"  # host reads are free on the CPU
    assert pick(4096, 6, 128, "cpu") == "sorted"
    assert pick(1, 6, 128, "cuda") == "gather"  # 6 assignments, 128 experts
    assert pick(64, 6, 128, "cuda") == "dense"  # decode batch: every expert is read anyway
    assert pick(65, 6, 128, "cuda") == "sorted"  # prefill-sized: compute dominates the one sync
    assert pick(256, 6, 128, "cuda", capturing=True) == "dense"  # a graph cannot hold the sync
    assert pick(64, 2, 8, "xpu") == "dense"
    expert = 40 * 2**20  # one expert of Nemotron-3-Nano in bf16 (up + down)
    assert pick(2, 6, 128, "cuda", expert) == "gather"  # 12 copies, 480 MiB
    assert pick(3, 6, 128, "cuda", expert) == "dense"  # 18 copies would be 720 MiB of scratch
