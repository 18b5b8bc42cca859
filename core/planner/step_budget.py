"""How many prompt tokens one engine step may carry (the chunk size), chosen from the device and the model.

Every step of the embedded engine carries all running decode rows plus prompt tokens up to this
budget (SGLang's mixed chunked prefill; a step with decodes up to the smaller mixed budget below). A decode step must read the weights once whatever it
computes; prompt tokens add compute. Below the point where a step's compute takes as long as its
weight reads, prompt tokens ride almost free on the reads; far above it, a step takes many decode
steps' time and every decoding request waits that long for its next token. So on an accelerator the
budget is the prompt tokens whose compute takes as long as STEP_WEIGHT_READS reads of the weights:

    tokens = STEP_WEIGHT_READS * FLOP_PER_BYTE * weights_bytes / (2 * active parameters)

(2 FLOPs per active parameter per token), rounded up to a power of two within [MIN, MAX]. A prompt
step then lasts about 1 + STEP_WEIGHT_READS decode steps at most, and prompts run near the device's
compute rate. Sparse models get larger budgets: a token touches few of the weights a step reads.
E.g. Nemotron-3-Nano-30B-A3B in bf16 (63 GB of weights, 3.6 B active): 3,531 -> 4,096 tokens; a
dense 8B model: 400 -> 2,048 (the floor). On the CPU a step is host-bound and its prompt compute is
slow: the engine's default (facts.DEFAULT_CHUNKED_PREFILL_SIZE).

A step where running requests decode (a mixed step) takes fewer prompt tokens (`mixed_budget`):
those whose compute takes ONE weight read, so a mixed step lasts about two decode steps and the
decoding requests' inter-token gaps stay within ~2x their median (issue 28's ITL goal) while
prompts still ride on the reads. Rounded up to a power of two, at least MIXED_MIN_TOKENS (below it
the per-step costs dominate), at most the chunk. Nano-30B bf16: 1,764 -> 2,048; a dense 8B model:
200 -> 1,024. Steps with no decodes (the first prompts, a burst after an idle spell) take the
whole chunk: nobody is waiting for a token then.
"""

from __future__ import annotations

from bringup.core.engine.facts import DEFAULT_CHUNKED_PREFILL_SIZE

# bf16 matrix FLOP/s over memory bytes/s of current accelerators (their spec sheets): H200 989 T /
# 4.8 TB/s = 206, H100 SXM 989 / 3.35 = 295, A100 312 / 2.04 = 153, MI300X 1307 / 5.3 = 247.
FLOP_PER_BYTE = 200
STEP_WEIGHT_READS = 2
MIN_TOKENS = 2048  # below this the per-step costs (launches, the weight reads) dominate the prompt work
MAX_TOKENS = 16384
MIXED_WEIGHT_READS = 1  # a step with decodes: its prompt compute about one weight read
MIXED_MIN_TOKENS = 1024


def _pow2_ceil(n: float) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _by_compute(layer_map, *, device: str, weights_bytes: int, reads: int, low: int, high: int) -> tuple[int | None, str]:
    """(the prompt tokens whose compute, 2 FLOPs per active parameter, takes `reads` weight reads,
    as a power of two within [low, high]; why). None on the CPU or when the model's parameter count
    is unknown (the why says which)."""
    if device == "cpu":
        return None, "the CPU's steps are host-bound"
    active = int(layer_map.params_active or layer_map.params_total or 0)
    if active <= 0 or weights_bytes <= 0:
        return None, "the model's parameter count is unknown"
    raw = reads * FLOP_PER_BYTE * weights_bytes / (2 * active)
    tokens = max(low, min(high, _pow2_ceil(raw)))
    return tokens, (f"the prompt tokens whose compute takes {reads} weight read{'s' * (reads != 1)} on a {device} "
                    f"device: {raw:,.0f} -> {tokens:,} within [{low:,}, {high:,}] (core/planner/step_budget.py)")


def prefill_budget(layer_map, *, device: str, weights_bytes: int) -> tuple[int, str]:
    """(prompt tokens per step, why) for the embedded engine on `device`."""
    tokens, why = _by_compute(layer_map, device=device, weights_bytes=weights_bytes, reads=STEP_WEIGHT_READS,
                              low=MIN_TOKENS, high=MAX_TOKENS)
    return (tokens, why) if tokens else (DEFAULT_CHUNKED_PREFILL_SIZE, why + ": the engine's default")


def mixed_budget(layer_map, *, device: str, weights_bytes: int, chunk: int) -> tuple[int, str]:
    """(prompt tokens in a step where running requests decode, why): at most `chunk`."""
    tokens, why = _by_compute(layer_map, device=device, weights_bytes=weights_bytes, reads=MIXED_WEIGHT_READS,
                              low=min(MIXED_MIN_TOKENS, chunk), high=chunk)
    return (tokens, why) if tokens else (chunk, why + ": the whole chunk")
