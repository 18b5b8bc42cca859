"""A low-precision kernel judged against the truth, not against another rounding of it.

On a GPU a fused kernel and the plain-torch reference round differently (FMA, the order of a
sum, libdevice's tanh or cos against torch's), so their bf16 outputs differ by an ulp in a share
of elements that says nothing about either. What matters is that the kernel is no further from
the float32 answer than the reference is: a kernel that rounds at a different point (bf16 before
the rotation, say) or takes a cos that is poor for large angles is, and fails here.
"""

from __future__ import annotations

import torch


def assert_as_accurate_as_reference(got: torch.Tensor, want: torch.Tensor, truth: torch.Tensor, what: str = "",
                                    slack: float = 1.25) -> None:
    """`got`'s mean and max error against `truth` are within `slack` of `want`'s (plus one float32 ulp)."""
    truth = truth.float()
    err_got, err_want = (got.float() - truth).abs(), (want.float() - truth).abs()
    floor = torch.finfo(torch.float32).eps * truth.abs().mean().item()
    mean_got, mean_want = err_got.mean().item(), err_want.mean().item()
    max_got, max_want = err_got.max().item(), err_want.max().item()
    assert mean_got <= slack * mean_want + floor, f"{what}: mean error {mean_got:.3g} against the reference's {mean_want:.3g}"
    # Max error: the kernel may land on the other side of one rounding where the reference did not.
    ulp = max_want if max_want > 0 else floor
    assert max_got <= 2 * ulp + floor, f"{what}: max error {max_got:.3g} against the reference's {max_want:.3g}"
