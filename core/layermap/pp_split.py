"""How SGLang splits decoder layers across pipeline stages (`get_pp_indices`).

Layers are split evenly; when they do not divide, the *last* `remainder` stages get one extra
layer each. `SGLANG_PP_LAYER_PARTITION` ("12,14,...") overrides the split in SGLang; the same
list can be passed here as `partition`.
"""

from __future__ import annotations

from bringup.core.errors import UserError


def pp_layer_ranges(num_layers: int, pp_size: int, partition: list[int] | None = None) -> list[tuple[int, int]]:
    """[start, end) of each stage's layers."""
    if isinstance(pp_size, bool) or not isinstance(pp_size, int) or pp_size < 1:
        raise UserError(f"--pp {pp_size!r} is not a positive integer; pass the number of pipeline stages, e.g. --pp 2")
    if pp_size > max(num_layers, 1):
        raise UserError(
            f"--pp {pp_size} is more pipeline stages than the model's {num_layers} layers; "
            f"use at most --pp {max(num_layers, 1)}"
        )
    if partition is not None:
        if len(partition) != pp_size or sum(partition) != num_layers or min(partition) < 1:
            raise UserError(
                f"layer partition {partition} must have {pp_size} positive entries summing to {num_layers}; "
                "fix the partition (SGLANG_PP_LAYER_PARTITION)"
            )
        counts = list(partition)
    else:
        base, remainder = divmod(num_layers, pp_size)
        counts = [base + (1 if rank >= pp_size - remainder else 0) for rank in range(pp_size)]
    ranges, start = [], 0
    for count in counts:
        ranges.append((start, start + count))
        start += count
    return ranges


def stage_of_each_layer(num_layers: int, pp_size: int, partition: list[int] | None = None) -> list[int]:
    stages = []
    for stage, (start, end) in enumerate(pp_layer_ranges(num_layers, pp_size, partition)):
        stages.extend([stage] * (end - start))
    return stages
