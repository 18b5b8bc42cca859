"""The engine's start-up warm-up: a few steps at the sizes real traffic brings, before the first
request, so that their one-time costs are paid at start-up (and shown in the log, like the graph
capture) instead of by the first users.

On an accelerator the first step at a new size pays for what the kernels set up lazily: Triton
compiles a kernel once per specialization (an integer argument equal to 1 or divisible by 16, a
None argument, a block size chosen from the batch) and autotunes a kernel once per key, and the
caching allocator takes its first large segments from the driver. On the H200, in a fresh process
serving 256 prompts of 1024 tokens in 32k-token steps, the steps paid 5.1 s of compiles in all (the
fused MoE's 128-row tile at the first 32k step, the conv kernel's and the decode attention's new
specializations at the 2nd and 3rd, the MoE's 32-row tile at the short last one) and the first one
6.3 GB of new allocator segments (bench/nano_full.py --trace-steps).

The warm-up runs dummy prompts through the normal scheduler and runner (nothing is special-cased),
laid out so that the steps cover what a busy server's prompt steps look like:
1. a full chunk of whole prompts, with the chunk's last prompt cut part-way;
2. steps of prompt tokens up to the mixed budget (scheduler.py) mixing the cut prompt's
   continuation (a Mamba state and KV prefix to resume from) and new prompts, beside the decodes of
   the prompts finished in step 1;
3. a shorter step whose token count is not a multiple of 16, then a few decode-only steps;
4. single prompts of 16, 19, 32, 35, ... tokens up to a quarter chunk: kernels choose their tiles
   and blocks by size (the fused MoE by rows per expert), and each band compiles its own.
Its requests are then gone: pools free, counters as before.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

# Tokens per step when the engine does not chunk prompts (the warm-up still needs a size).
UNCHUNKED_STEP = 8192
NEW_TOKENS = 3  # outputs per warm-up request: its first token in a prompt step, then decodes


@dataclass
class WarmupPlan:
    """Waves of prompts, each run to completion before the next: first the chunk-sized one, then
    single prompts of a ladder of lengths (each length and one 3 longer), so that steps of every
    size band (kernels pick their tiles by size) and both divisibilities come by once."""
    waves: list[list[int]]
    new_tokens: int = NEW_TOKENS

    @property
    def prompt_lens(self) -> list[int]:
        return [n for wave in self.waves for n in wave]

    @property
    def prompt_tokens(self) -> int:
        return sum(self.prompt_lens)


@dataclass
class WarmupReport:
    seconds: float = 0.0
    steps: list[dict] = field(default_factory=list)  # per step: prompt_tokens, decodes, resumed, tokens

    def describe(self, chunk: int | None) -> str:
        prompt_steps = [s for s in self.steps if s["prompt_tokens"]]
        largest = max((s["tokens"] for s in self.steps), default=0)
        return (f"Warm-up: {len(self.steps)} steps ({len(prompt_steps)} with prompt tokens, "
                f"{sum(s['prompt_tokens'] for s in self.steps):,} prompt tokens, largest step {largest:,} tokens, "
                f"chunk {chunk or 'none'}) in {self.seconds:.2f} s")


def plan_warmup(*, chunk: int | None, max_context: int | None, max_running: int, kv_tokens: int | None,
                page_size: int = 16, new_tokens: int = NEW_TOKENS) -> WarmupPlan | None:
    """A first wave of prompts that fills two chunks and part of a third, then the ladder of single
    prompts; all within what the pools hold (half the KV pool at most, one state slot per request,
    the context length). None when not even one prompt fits."""
    size = int(chunk) if chunk and chunk > 0 else UNCHUNKED_STEP
    room = int(max_context) - new_tokens - 1 if max_context else size
    want = 2 * size + size // 4 + 7  # two full chunks, then a step of ~chunk/4 + decodes (odd on purpose)
    length = max(2, min(size // 8 + 1, room))  # several prompts per chunk, cut at an odd place
    count = -(-want // length)
    count = max(1, min(count, int(max_running)))
    if count * length < want:  # few slots: longer prompts instead
        length = max(2, min(room, -(-want // count)))
    if kv_tokens is not None:
        per = lambda n: n + new_tokens + page_size  # noqa: E731 - a prompt's pages, rounded up
        budget = int(kv_tokens) // 2
        while count > 1 and count * per(length) > budget:
            count -= 1
        if per(length) > budget:
            length = budget - new_tokens - page_size
    if length < 2 or room < 2:
        return None
    lens = [length] * count
    if count > 1:  # the last one shorter, so the tail step is not a multiple of 16 either way
        lens[-1] = max(2, length - 5)
    waves = [lens]
    ladder = 16
    most = room if kv_tokens is None else min(room, int(kv_tokens) // 2 - new_tokens - page_size)
    while ladder <= max(16, size // 4) and ladder + 3 <= most:
        waves += [[ladder], [ladder + 3]]
        ladder *= 2
    return WarmupPlan(waves, new_tokens)


def run_warmup(engine, plan: WarmupPlan, seed: int = 0) -> WarmupReport:
    """Run the plan's requests to completion through `engine.step()`; leave no trace in the
    engine's counters, logs or pools."""
    from .sampling import SamplingParams

    if engine.has_unfinished():
        raise RuntimeError("the warm-up runs before any request; requests are already in flight")
    rng = random.Random(seed)
    vocab = max(4, int(engine.vocab_size or 4))
    params = SamplingParams(max_new_tokens=plan.new_tokens, temperature=0.0, ignore_eos=True)
    sch = engine.scheduler
    saved = (dict(sch.totals), sch.num_preemptions, sch.swa_evicted_pages, dict(engine._totals), engine.batch_log.log)
    engine.batch_log.log = lambda message: None
    report = WarmupReport()
    started = time.monotonic()
    try:
        for wave in plan.waves:
            for n in wave:
                engine.add_request([rng.randrange(1, vocab) for _ in range(n)], params, detokenize=False)
            while engine.has_unfinished():
                engine.step()
                if engine.last_step is not None and engine.last_step.requests:
                    report.steps.append(step_summary(engine.last_step))
    finally:
        engine.batch_log.log = saved[4]
        sch.totals.clear()
        sch.totals.update(saved[0])
        sch.num_preemptions, sch.swa_evicted_pages = saved[1], saved[2]
        engine._totals.clear()
        engine._totals.update(saved[3])
    report.seconds = time.monotonic() - started
    return report


def step_summary(last) -> dict:
    """What a step just run computed (its requests' books are already advanced)."""
    prompt = decodes = resumed = 0
    for req, n in zip(last.requests, last.num_new_tokens):
        start = req.num_computed - n
        if start >= len(req.prompt_ids):
            decodes += 1
        else:
            prompt += min(n, len(req.prompt_ids) - start)
            resumed += start > 0
    return {"prompt_tokens": prompt, "decodes": decodes, "resumed": resumed, "tokens": last.num_tokens}
