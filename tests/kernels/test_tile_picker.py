"""TilePicker (kernels/triton/tile_picker.py): where nothing can be timed (the CPU interpreter) it
takes the default without launching; on a device it times each candidate once per shape and keeps
the fastest, passing over a candidate that fails (the bench lists why)."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels.triton.tile_picker import TilePicker


def test_cpu_takes_the_default_without_timing():
    picker, launched = TilePicker("t"), []
    got = picker.pick(torch.device("cpu"), ("shape", 1), ["first", "second"], launched.append)
    assert got == "first" and launched == [] and picker.timings == {} and picker.chosen == {}


@pytest.mark.gpu
def test_device_times_each_candidate_once_and_keeps_the_fastest():
    from bringup.kernels.triton import availability

    dev = torch.device(next(d for d in availability.GPU_DEVICE_TYPES if availability.triton_reason(d) is None))
    a, b = torch.randn(1 << 22, device=dev), torch.empty(1 << 22, device=dev)
    work = {"slow": lambda: [b.copy_(a) for _ in range(20)], "fast": lambda: b.copy_(a)}
    picker, launched = TilePicker("t"), []

    def launch(name):
        launched.append(name)
        if name == "broken":
            raise ValueError("cannot compile this tile")
        work[name]()

    assert picker.pick(dev, "k", ["slow", "broken", "fast"], launch) == "fast"
    assert set(launched) == {"slow", "broken", "fast"}
    assert [c for c, _ in picker.timings[(str(dev), "k")]] == ["slow", "fast"]
    assert picker.failures[(str(dev), "k")] == [("broken", "ValueError: cannot compile this tile")]
    launched.clear()
    assert picker.pick(dev, "k", ["slow", "fast"], launch) == "fast" and launched == []  # kept, not timed again
