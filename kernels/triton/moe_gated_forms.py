"""Which form of the gated MoE (fused_moe_gated.py: gemv, split, grouped, sorted) runs a decode step,
timed on the device per decode-graph batch size.

fused_moe_gated.decode_form estimates the form from the shapes; on the H200 (gpt-oss's experts,
graphed, us per layer at 1 / 2 / 4 / 8 / 16 tokens) grouped 58 / 108 / 176 / 252 / 326 beat the split
form's 66 / 123 / 212 / 335 / 436 that the estimate chose up to 4 tokens, and sorted came close
(58.5 / 108 / 181 / 300 / 369). So where the engine captures decode graphs it names their batch sizes
(`measure_at`), and the first eager call in each size's bucket (the capture's warm-up run of that
size: tokens in (previous size, size]) times every form that can run it with TilePicker and keeps the
fastest for the bucket; every later call of a token count in that bucket runs it. The timed calls
route each token to k experts drawn at random (the capture's padding rows would all pick the same k,
where real decode traffic spreads over many). The estimate runs where nothing is timed: on a CPU
(the interpreter), inside a capture, above the largest size, before `measure_at`, and where
BRINGUP_MOE_FORMS=estimate (or `measure` is set False: bench/families.py --moe-forms estimate).
"""

from __future__ import annotations

import os
from typing import Callable, Hashable, NamedTuple, Sequence

import torch

from .tile_picker import TilePicker

ENV_VAR = "BRINGUP_MOE_FORMS"  # "timed" (the default) or "estimate"


class LayerShape(NamedTuple):
    """What the forms' times depend on besides the token count: one MoE layer's shapes."""

    experts: int
    top_k: int
    n: int  # gate/up outputs per expert
    k: int  # the hidden size they read
    h: int  # down's outputs
    act: str
    biases: bool
    dtype: str
    interleaved: bool  # gate/up columns interleaved in one tensor (gpt-oss)

    def __str__(self) -> str:
        return (f"{self.experts} experts, top {self.top_k}, {self.k} -> {self.n} -> {self.h}, {self.act}"
                f"{', biases' if self.biases else ''}, {self.dtype}{', interleaved' if self.interleaved else ''}")


class DecodeForms:
    """The forms chosen per (bucket, shapes), and the buckets being timed."""

    def __init__(self, picker: TilePicker | None = None):
        self.picker = picker or TilePicker("gated MoE decode form")
        self.buckets: tuple[int, ...] = ()
        self.measure = os.environ.get(ENV_VAR, "timed").strip().lower() != "estimate"
        self.estimates: dict[tuple, str] = {}  # picker key -> the estimate's form at the bucket size (logs)

    def measure_at(self, buckets: Sequence[int]) -> None:
        """Time the forms per bucket of these token counts (the decode graphs' batch sizes)."""
        self.buckets = tuple(sorted({int(b) for b in buckets if int(b) > 0}))

    def bucket_for(self, tokens: int) -> int | None:
        return next((b for b in self.buckets if b >= tokens), None)

    def choose(self, device: torch.device, tokens: int, shapes: Hashable, estimate: Callable[[int], str],
               candidates: Callable[[int], Sequence[str]], launch: Callable[[str], None]) -> str:
        """The form for `tokens` tokens of a layer of these `shapes`: the bucket's timed choice, else
        `estimate(tokens)`. `candidates(bucket)`: the forms that can run every token count of the bucket,
        the estimate's first; `launch(form)` runs the call in that form (with the timing's routing)."""
        bucket = self.bucket_for(tokens)
        if not self.measure or bucket is None:
            return estimate(tokens)
        key = (bucket, shapes)
        if (str(device), key) not in self.picker.chosen and not self.picker.can_time(device):
            return estimate(tokens)
        self.estimates.setdefault(key, estimate(bucket))
        return self.picker.pick(device, key, tuple(candidates(bucket)), launch)

    def describe(self) -> list[str]:
        """One line per layer shape: the chosen form per bucket with its time, and what the estimate
        would have run (its time where it was timed too)."""
        by_shape: dict[Hashable, list[str]] = {}
        for (device, (bucket, shapes)), chosen in sorted(self.picker.chosen.items(), key=lambda kv: kv[0][1][0]):
            times = dict(self.picker.timings.get((device, (bucket, shapes)), []))
            guess = self.estimates.get((bucket, shapes))
            cell = f"{bucket} {chosen} {times.get(chosen, float('nan')):.0f} us"
            if guess is not None and guess != chosen:
                cell += f" (estimate {guess} {times[guess]:.0f} us)" if guess in times else f" (estimate {guess})"
            failed = [form for form, _ in self.picker.failures.get((device, (bucket, shapes)), [])]
            if failed:
                cell += f" ({', '.join(failed)} failed)"
            by_shape.setdefault(shapes, []).append(cell)
        return [f"Gated MoE decode form by batch size ({shapes}; timed, random routing): " + ", ".join(cells)
                for shapes, cells in by_shape.items()]

    def clear(self) -> None:
        self.picker.clear()
        self.estimates.clear()
