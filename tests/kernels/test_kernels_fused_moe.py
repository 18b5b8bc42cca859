"""The fused MoE's pieces: the plain references on the CPU (sorting into expert blocks, the grouped
GEMM, the residual + norm), and the Triton kernels against them where a GPU runs Triton."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels import reference as ref
from bringup.kernels.reference.moe_align import moe_align, padded_rows
from bringup.kernels.reference.moe_grouped_gemm import moe_grouped_gemm
from bringup.kernels.triton import availability


def _gpu() -> str | None:
    return next((d for d in availability.GPU_DEVICE_TYPES if availability.triton_reason(d) is None), None)


GPU = _gpu()
needs_gpu = pytest.mark.skipif(GPU is None, reason="no device for the Triton kernels")


def _routing(T, k, E, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)])


@pytest.mark.parametrize("T,k,E,block", [(1, 6, 128, 16), (5, 2, 4, 4), (33, 3, 8, 16), (64, 6, 16, 32)])
def test_align_puts_every_assignment_once_in_its_experts_block(T, k, E, block):
    ids = _routing(T, k, E, seed=T)
    sorted_ids, block_expert, used = moe_align(ids, E, block)
    n = T * k
    assert sorted_ids.numel() == padded_rows(n, E, block) and sorted_ids.numel() % block == 0
    real = sorted_ids[sorted_ids < n].long()
    assert sorted(real.tolist()) == list(range(n)), "each assignment exactly once"
    flat = ids.reshape(-1)
    for r in range(int(used)):
        a = int(sorted_ids[r])
        if a < n:
            assert int(block_expert[r // block]) == int(flat[a]), f"row {r} sits in another expert's block"
    assert (block_expert[int(used) // block:] == -1).all(), "blocks past the end belong to nobody"
    # Within an expert, assignments keep their order (stable), so results are deterministic.
    for e in range(E):
        rows = [int(a) for a in sorted_ids.tolist() if a < n and int(flat[a]) == e]
        assert rows == sorted(rows)


@pytest.mark.parametrize("act", ["relu2", "silu"])
def test_grouped_gemm_chain_equals_reference_moe(act):
    torch.manual_seed(0)
    T, k, E, H, I, block = 7, 2, 5, 16, 12, 4
    x = torch.randn(T, H, dtype=torch.float64)
    up, down = torch.randn(E, I, H, dtype=torch.float64), torch.randn(E, H, I, dtype=torch.float64)
    ids = _routing(T, k, E, seed=3)
    w = torch.rand(T, k, dtype=torch.float64)
    sorted_ids, block_expert, _ = moe_align(ids, E, block)
    h = moe_grouped_gemm(x, up, sorted_ids, block_expert, block, T * k, k, act=act)
    y = moe_grouped_gemm(h, down, sorted_ids, block_expert, block, T * k, 1, weights=w)
    expected = ref.moe_experts(x, w, ids, up, down, None, act, strategy="gather")
    torch.testing.assert_close(y.view(T, k, H).sum(1), expected, rtol=1e-5, atol=1e-4)  # the reference sums in float32


def test_add_rms_norm_is_add_then_norm():
    torch.manual_seed(0)
    h, d, w = torch.randn(3, 32, dtype=torch.bfloat16), torch.randn(3, 32, dtype=torch.bfloat16), torch.randn(32, dtype=torch.bfloat16)
    new, y = ref.add_rms_norm(h, d, w, 1e-5)
    assert torch.equal(new, h + d)
    assert torch.equal(y, ref.rms_norm(h + d, w, 1e-5, multiply_in_float32=True))
    same, y0 = ref.add_rms_norm(h, None, w, 1e-5)
    assert same is h and torch.equal(y0, ref.rms_norm(h, w, 1e-5, multiply_in_float32=True))


def test_shared_expert_in_slices_is_the_shared_expert():
    """The shared expert cut in S slices of the experts' width, run as S extra experts, sums to the
    shared expert; the routed parts sum to the routed experts; the residual add takes both."""
    from bringup.kernels.reference.moe_shared import moe_experts_shared_unsummed, shared_slices

    torch.manual_seed(0)
    T, k, E, H, I = 5, 2, 6, 16, 12
    x = torch.randn(T, H, dtype=torch.float64)
    up, down = torch.randn(E, I, H, dtype=torch.float64), torch.randn(E, H, I, dtype=torch.float64)
    su, sd = torch.randn(2 * I, H, dtype=torch.float64), torch.randn(H, 2 * I, dtype=torch.float64)
    ids, w = _routing(T, k, E, seed=1), torch.rand(T, k, dtype=torch.float64)
    shared, routed = moe_experts_shared_unsummed(x, w, ids, up, down, su, sd, "relu2")
    assert shared.shape == (T, 2, H) and routed.shape == (T, k, H)
    torch.testing.assert_close(shared.sum(1), ref.mlp(x, su, sd, None, "relu2"))
    torch.testing.assert_close(routed.sum(1), ref.moe_experts(x, w, ids, up, down, None, "relu2", strategy="gather"),
                               rtol=1e-5, atol=1e-4)  # the reference sums in float32
    assert shared_slices(su[:-1], sd[:, :-1], I) is None  # not a multiple of the experts' width
    h = torch.randn(T, H, dtype=torch.float64)
    new, _ = ref.add_rms_norm(h, (shared, routed), torch.ones(H, dtype=torch.float64), 1e-5)
    torch.testing.assert_close(new, h + shared.sum(1) + routed.sum(1))


def test_router_logits_are_float32_whatever_the_rows():
    x = torch.randn(3, 16, dtype=torch.bfloat16)
    w = torch.randn(8, 16)
    logits = ref.router_logits(x, w)
    assert logits.dtype == torch.float32
    torch.testing.assert_close(logits, x.float() @ w.T)


# GPU: the Triton kernels against the references ------------------------------------------------

def _rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12)).item()


@needs_gpu
@pytest.mark.parametrize("T,k,E,block", [(1, 6, 128, 16), (37, 6, 128, 16), (256, 6, 128, 32), (2048, 6, 128, 64)])
def test_triton_align_matches_reference(T, k, E, block):
    from bringup.kernels.triton.fused_moe import moe_align as fast

    ids = _routing(T, k, E, seed=T).to(GPU)
    got, want = fast(ids, E, block), moe_align(ids, E, block)
    for g, w, what in zip(got, want, ("sorted_ids", "block_expert", "rows_used")):
        assert torch.equal(g.cpu(), w.cpu()), what


@needs_gpu
@pytest.mark.parametrize("T", [1, 8, 64, 300, 2048])
def test_triton_moe_experts_matches_reference(T):
    from bringup.kernels.triton.fused_moe import moe_experts as fast

    torch.manual_seed(T)
    E, k, H, I = 32, 6, 256, 192
    x = torch.randn(T, H, device=GPU, dtype=torch.bfloat16)
    up = torch.randn(E, I, H, device=GPU, dtype=torch.bfloat16) / H**0.5
    down = torch.randn(E, H, I, device=GPU, dtype=torch.bfloat16) / I**0.5
    ids = _routing(T, k, E, seed=T).to(GPU)
    w = torch.rand(T, k, device=GPU)
    got = fast(x, w, ids, up, down, None, "relu2")
    want = ref.moe_experts(x.double(), w.double(), ids, up.double(), down.double(), None, "relu2", strategy="gather")
    assert got.dtype == x.dtype and torch.isfinite(got).all()
    assert _rel(got, want) < 1e-2


@needs_gpu
@pytest.mark.parametrize("T", [1, 50])
def test_triton_router_matches_reference(T):
    from bringup.kernels.triton.fused_moe import route_sigmoid_grouped as fast

    logits = torch.randn(T, 128, device=GPU)
    bias = torch.randn(128, device=GPU) * 0.1
    w, i = fast(logits, bias, 6, 1, 1, True, 2.5)
    w_ref, i_ref = ref.route_sigmoid_grouped(logits, bias, 6, 1, 1, True, 2.5)
    assert torch.equal(i, i_ref)
    torch.testing.assert_close(w, w_ref, rtol=1e-5, atol=1e-6)


@needs_gpu
@pytest.mark.parametrize("delta", [True, False])
def test_triton_add_rms_norm_matches_reference(delta):
    from bringup.kernels.triton.norms import add_rms_norm as fast

    h = torch.randn(5, 2688, device=GPU, dtype=torch.bfloat16)
    d = torch.randn(5, 2688, device=GPU, dtype=torch.bfloat16) if delta else None
    w = torch.randn(2688, device=GPU, dtype=torch.bfloat16)
    new, y = fast(h, d, w, 1e-5)
    new_ref, y_ref = ref.add_rms_norm(h, d, w, 1e-5)
    assert torch.equal(new, new_ref)
    assert _rel(y, y_ref) < 1e-2


@needs_gpu
@pytest.mark.parametrize("before", [False, True])
def test_triton_gated_rms_norm_matches_reference(before):
    from bringup.kernels.triton.norms import gated_rms_norm as fast

    x = torch.randn(4, 4096, device=GPU, dtype=torch.bfloat16)
    z = torch.randn(4, 4096, device=GPU, dtype=torch.bfloat16)
    w = torch.randn(4096, device=GPU, dtype=torch.bfloat16)
    got = fast(x, z, w, 1e-5, 512, norm_before_gate=before)
    want = ref.gated_rms_norm(x, z, w, 1e-5, 512, norm_before_gate=before)
    assert _rel(got, want) < 1e-2


@needs_gpu
@pytest.mark.parametrize("T", [1, 3, 8, 9])
def test_triton_moe_with_shared_expert_matches_reference(T):
    """Decode sizes run the shared and routed experts in two GEMV launches; above GEMV_MAX_TOKENS
    the shared expert goes through mlp and the routed ones through the grouped GEMMs."""
    from bringup.kernels.reference.moe_shared import moe_experts_shared_unsummed as reference
    from bringup.kernels.triton.fused_moe import moe_experts_shared_unsummed as fast

    torch.manual_seed(T)
    E, k, H, I = 32, 6, 256, 192
    x = torch.randn(T, H, device=GPU, dtype=torch.bfloat16)
    up = torch.randn(E, I, H, device=GPU, dtype=torch.bfloat16) / H**0.5
    down = torch.randn(E, H, I, device=GPU, dtype=torch.bfloat16) / I**0.5
    su = torch.randn(2 * I, H, device=GPU, dtype=torch.bfloat16) / H**0.5
    sd = torch.randn(H, 2 * I, device=GPU, dtype=torch.bfloat16) / I**0.5
    ids = _routing(T, k, E, seed=T).to(GPU)
    w = torch.rand(T, k, device=GPU)
    shared, routed = fast(x, w, ids, up, down, su, sd, "relu2")
    s_ref, r_ref = reference(x.double(), w.double(), ids, up.double(), down.double(), su.double(), sd.double(), "relu2")
    assert shared.dtype == routed.dtype == x.dtype and torch.isfinite(routed).all() and torch.isfinite(shared).all()
    got_shared = shared.float().sum(1) if shared.dim() == 3 else shared.float()
    assert _rel(got_shared, s_ref.sum(1)) < 1e-2
    assert _rel(routed.float().sum(1), r_ref.sum(1)) < 1e-2


@needs_gpu
@pytest.mark.parametrize("T", [1, 7, 100])
def test_triton_router_logits_match_reference(T):
    from bringup.kernels.triton.fused_moe import router_logits as fast

    x = torch.randn(T, 2688, device=GPU, dtype=torch.bfloat16)
    w = torch.randn(128, 2688, device=GPU) * 0.02
    got, want = fast(x, w), ref.router_logits(x, w)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@needs_gpu
def test_triton_add_rms_norm_takes_shared_slices():
    from bringup.kernels.triton.norms import add_rms_norm as fast

    h = torch.randn(3, 2688, device=GPU, dtype=torch.bfloat16)
    parts = torch.randn(3, 8, 2688, device=GPU, dtype=torch.bfloat16)
    delta = (parts[:, 6:], parts[:, :6])  # views of one buffer, as the fused MoE returns them
    w = torch.randn(2688, device=GPU, dtype=torch.bfloat16)
    new, y = fast(h, delta, w, 1e-5)
    new_ref, y_ref = ref.add_rms_norm(h, delta, w, 1e-5)
    assert _rel(new, new_ref) < 1e-2 and _rel(y, y_ref) < 1e-2
