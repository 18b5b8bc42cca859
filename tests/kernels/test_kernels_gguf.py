"""GGUF blocks: the torch decoders against gguf-py's numpy ones, and the CPU products (torch's int4
kernel for the 4-bit types, the blockwise Q8_0 product) against the dequantising reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf_helpers import random_blocks

from bringup.kernels.cpu.gguf_int4 import int4_linear, pack_int4
from bringup.kernels.cpu.gguf_q8 import q8_0_linear
from bringup.kernels.reference.gguf_blocks import BLOCKS, dequantize_blocks, gguf_embedding, gguf_linear

gguf = pytest.importorskip("gguf")


@pytest.mark.parametrize("ggml_type", sorted(BLOCKS))
def test_decoders_equal_gguf_py(ggml_type):
    from gguf.quants import dequantize

    raw = random_blocks(ggml_type, 6, 512)
    expected = dequantize(raw, getattr(gguf.GGMLQuantizationType, ggml_type)).reshape(6, 512)
    assert np.array_equal(dequantize_blocks(torch.from_numpy(raw), ggml_type, 512).numpy(), expected)


@pytest.mark.parametrize("ggml_type", sorted(BLOCKS))
def test_reference_linear_and_embedding_read_the_dequantised_weight(ggml_type, monkeypatch):
    import sys

    monkeypatch.setattr(sys.modules["bringup.kernels.reference.gguf_blocks"], "ROWS_PER_CHUNK", 7)  # ragged slabs
    blocks = torch.from_numpy(random_blocks(ggml_type, 20, 256))
    w = dequantize_blocks(blocks, ggml_type, 256)
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(0))
    expected = x @ w.T
    # Slab by slab the GEMM sums in another order: float32 rounding of a 256-term sum, read against
    # the output's size (an absolute 1e-6 failed on outputs near zero).
    torch.testing.assert_close(gguf_linear(x, blocks, ggml_type, 256), expected,
                               rtol=1e-5, atol=1e-5 * expected.abs().max().item())
    ids = torch.tensor([[4, 0], [19, 4]])
    assert torch.equal(gguf_embedding(ids, blocks, ggml_type, 256, torch.float32), w[ids])


@pytest.mark.parametrize("ggml_type", ["Q4_0", "Q4_1", "Q4_K"])
@pytest.mark.parametrize("rows", [1, 5])
def test_int4_product_matches_reference(ggml_type, rows):
    blocks = torch.from_numpy(random_blocks(ggml_type, 64, 512, seed=1))
    packed, table = pack_int4(blocks, ggml_type, 512)
    assert packed.numel() + 2 * table.numel() <= blocks.numel() * 1.15  # still about half a byte a weight
    x = torch.randn(rows, 512, generator=torch.Generator().manual_seed(2))
    expected = gguf_linear(x, blocks, ggml_type, 512)
    got = int4_linear(x, packed, table, 512)
    # bf16 activations and bf16 scales: a few parts in a thousand of the largest output
    assert (got - expected).abs().max() <= 1e-2 * expected.abs().max()


@pytest.mark.parametrize("rows", [1, 4])
def test_blockwise_q8_product_matches_reference(rows, monkeypatch):
    import sys

    monkeypatch.setattr(sys.modules["bringup.kernels.cpu.gguf_q8"], "ROWS_PER_CHUNK", 24)
    blocks = torch.from_numpy(random_blocks("Q8_0", 50, 256, seed=2))
    x = torch.randn(rows, 256, generator=torch.Generator().manual_seed(3))
    expected = gguf_linear(x, blocks, "Q8_0", 256)
    got = q8_0_linear(x, blocks, 256)
    assert got.shape == expected.shape
    assert (got - expected).abs().max() <= 1e-2 * expected.abs().max()


@pytest.mark.parametrize("rows", [1, 6])
def test_widened_q8_product_is_within_bf16_rounding_of_reference(rows, monkeypatch):
    import sys

    from bringup.kernels.cpu.gguf_q8_widened import widen_q8_0, widened_linear

    monkeypatch.setattr(sys.modules["bringup.kernels.cpu.gguf_q8_widened"], "ROWS_PER_CHUNK", 24)  # ragged slabs
    blocks = torch.from_numpy(random_blocks("Q8_0", 50, 256, seed=4))
    codes, scales = widen_q8_0(blocks, 256)
    assert codes.dtype == torch.bfloat16 and codes.shape == (8, 50, 32) and scales.shape == (8, 50)
    x = torch.randn(2, rows, 256, generator=torch.Generator().manual_seed(5))
    bias = torch.randn(50, generator=torch.Generator().manual_seed(6))
    expected = gguf_linear(x, blocks, "Q8_0", 256, bias)
    got = widened_linear(x, codes, scales, bias)
    assert got.shape == expected.shape and got.dtype == x.dtype
    # Rounded to bf16 (unit roundoff u = 2^-8): each activation, and each block's 32-term dot product
    # (summed in float32 inside the product). So per output |error| <= u * sum|s q||x| + u * sum_b|dot_b|
    # <= 2u (1 + u) * (|W| @ |x|); codes and scales are exact, the float32 sums add ~1e-6 of it.
    w = dequantize_blocks(blocks, "Q8_0", 256)
    bound = 2 * 2**-8 * (1 + 2**-8) * (x.abs() @ w.abs().T) + 1e-5 * (x.abs() @ w.abs().T + bias.abs())
    assert ((got - expected).abs() <= bound).all()


def test_widened_q8_rows_are_the_dequantised_embedding():
    from bringup.kernels.cpu.gguf_q8_widened import widen_q8_0, widened_rows

    blocks = torch.from_numpy(random_blocks("Q8_0", 30, 128, seed=7))
    codes, scales = widen_q8_0(blocks, 128)
    ids = torch.tensor([[3, 0, 29], [3, 17, 8]])
    assert torch.equal(widened_rows(ids, codes, scales, torch.float32),
                       gguf_embedding(ids, blocks, "Q8_0", 128, torch.float32))


@pytest.mark.parametrize("ggml_type", ["Q6_K", "Q5_0"])
@pytest.mark.parametrize("rows", [1, 5])
def test_bf16_copy_product_is_within_bf16_rounding_of_reference(ggml_type, rows, monkeypatch):
    import sys

    from bringup.kernels.cpu.gguf_bf16_copy import bf16_copy, bf16_copy_linear

    monkeypatch.setattr(sys.modules["bringup.kernels.cpu.gguf_bf16_copy"], "ROWS_PER_CHUNK", 7)  # ragged slabs
    blocks = torch.from_numpy(random_blocks(ggml_type, 20, 512, seed=8))
    w = dequantize_blocks(blocks, ggml_type, 512)
    copy = bf16_copy(blocks, ggml_type, 512)
    assert copy.dtype == torch.bfloat16 and torch.equal(copy, w.to(torch.bfloat16))  # each weight rounded once
    x = torch.randn(rows, 512, generator=torch.Generator().manual_seed(9))
    bias = torch.randn(20, generator=torch.Generator().manual_seed(10))
    expected = gguf_linear(x, blocks, ggml_type, 512, bias)
    got = bf16_copy_linear(x, copy, bias)
    assert got.dtype == x.dtype and got.shape == expected.shape
    # Rounded to bf16 (u = 2^-8): each weight, each activation (a product term off by at most
    # (2u + u^2) of |w x|), and the float32 sum once at the output (u of it): <= 3u (1 + u) (|W| @ |x|).
    magnitude = x.abs() @ w.abs().T
    assert ((got - expected).abs() <= 3 * 2**-8 * (1 + 2**-8) * magnitude + 1e-5 * (magnitude + bias.abs())).all()
