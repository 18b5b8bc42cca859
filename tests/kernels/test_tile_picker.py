"""TilePicker (kernels/triton/tile_picker.py): where nothing can be timed (the CPU interpreter) it
takes the default without launching; on a device (or anywhere with an injected timer) it times each
candidate once per shape and keeps the fastest, passing over a candidate that fails (the bench lists why)."""

from __future__ import annotations

import pytest
import torch

from bringup.kernels.triton.tile_picker import TilePicker


def test_cpu_takes_the_default_without_timing():
    picker, launched = TilePicker("t"), []
    got = picker.pick(torch.device("cpu"), ("shape", 1), ["first", "second"], launched.append)
    assert got == "first" and launched == [] and picker.timings == {} and picker.chosen == {}


def test_an_injected_timer_picks_on_the_cpu_the_fastest_of_those_that_run():
    launched = []

    def timer(device, call):  # us per call: what the launch left in `launched`, by its name's length
        call()
        return float(len(launched[-1]))

    def launch(name):
        launched.append(name)
        if name == "broken":
            raise ValueError("cannot compile this tile")

    picker = TilePicker("t", timer=timer)
    assert picker.can_time(torch.device("cpu"))
    assert picker.pick(torch.device("cpu"), "k", ["slowest", "broken", "fast", "quick"], launch) == "fast"
    assert launched == ["slowest", "broken", "fast", "quick"]
    assert picker.timings[("cpu", "k")] == [("slowest", 7.0), ("fast", 4.0), ("quick", 5.0)]
    assert picker.failures[("cpu", "k")] == [("broken", "ValueError: cannot compile this tile")]
    launched.clear()
    assert picker.pick(torch.device("cpu"), "k", ["slowest", "fast"], launch) == "fast" and launched == []


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
