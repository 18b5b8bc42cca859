"""Sampling parameters and batched sampling on the device.

One call samples the next token of every request in the batch: greedy rows (temperature 0) take
the argmax, the others go through temperature, top-k and top-p and are drawn with the
exponential-race trick (argmax of p / E with E ~ Exp(1) is a draw from p), which lets a seeded
request use its own generator for its own row while unseeded rows share one draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .forward_batch import upload
from .logprobs import MAX_TOP_LOGPROBS


# Below this temperature sampling is greedy (as SGLang's and vLLM's _SAMPLING_EPS): dividing the
# logits by a denormal overflows them to inf and the softmax to NaN, which would pick token 0.
GREEDY_TEMPERATURE = 1e-5
MAX_SEED = 2**63 - 1  # torch generators take a signed 64-bit seed


class InvalidSamplingParams(ValueError):
    """A sampling parameter is out of range; the message names it and the range."""


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 128
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = -1  # -1 (or 0) = off
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = None  # None: none; N >= 0: the chosen token's logprob and the top N (logprobs.py)

    def __post_init__(self) -> None:
        # Accept a single string and lists (as JSON gives them); store tuples so params hash.
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids or ()))
        _check_int("max_new_tokens", self.max_new_tokens, low=1)
        _check_number("temperature", self.temperature)
        if self.temperature < 0:
            raise InvalidSamplingParams(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        _check_number("top_p", self.top_p)
        if not 0 < self.top_p <= 1:
            raise InvalidSamplingParams(f"top_p must be in (0, 1], got {self.top_p}")
        _check_int("top_k", self.top_k, low=-1)
        if self.seed is not None:
            _check_int("seed", self.seed, low=0)
            if self.seed > MAX_SEED:
                raise InvalidSamplingParams(f"seed must be <= {MAX_SEED}, got {self.seed}")
        for s in stop:
            if not isinstance(s, str) or not s:
                raise InvalidSamplingParams(f"stop must be non-empty strings, got {s!r}")
        for t in self.stop_token_ids:
            _check_int("stop_token_ids entry", t, low=0)
        if not isinstance(self.ignore_eos, bool):
            raise InvalidSamplingParams(f"ignore_eos must be true or false, got {self.ignore_eos!r}")
        if self.logprobs is not None:
            _check_int("logprobs", self.logprobs, low=0)
            if self.logprobs > MAX_TOP_LOGPROBS:
                raise InvalidSamplingParams(f"logprobs must be <= {MAX_TOP_LOGPROBS} (top alternatives per token), "
                                            f"got {self.logprobs}")

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_TEMPERATURE

    @classmethod
    def from_dict(cls, d: dict | None) -> "SamplingParams":
        """From JSON (SGLang's `sampling_params`); unknown keys are an error, not silently ignored."""
        d = dict(d or {})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise InvalidSamplingParams(f"unknown sampling parameter(s) {unknown}; known: {sorted(known)}")
        return cls(**d)


def _check_int(name: str, value, *, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSamplingParams(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise InvalidSamplingParams(f"{name} must be >= {low}, got {value}")


def _check_number(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidSamplingParams(f"{name} must be a finite number, got {value!r}")


def make_generator(seed: int | None, device) -> torch.Generator | None:
    """A per-request generator, so a seeded request draws the same tokens in any batch."""
    if seed is None:
        return None
    g = torch.Generator(device=torch.device(device))
    g.manual_seed(seed)
    return g


def top_k_mask(logits: torch.Tensor, top_k: torch.Tensor) -> torch.Tensor:
    """Set to -inf everything below each row's k-th largest logit; k <= 0 means off."""
    vocab = logits.shape[-1]
    k = torch.where(top_k <= 0, vocab, top_k.clamp(max=vocab)).to(torch.long)
    kth = logits.sort(dim=-1, descending=True).values.gather(-1, (k - 1).unsqueeze(-1))
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_mask(logits: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Keep the smallest set of top tokens whose probability reaches top_p (always at least one)."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # mass of the tokens ranked above this one
    drop_sorted = (before >= top_p.unsqueeze(-1)) & (top_p < 1).unsqueeze(-1)
    drop_sorted[..., 0] = False  # the top token stays even when top_p rounds to 0 in float32
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def sample(logits: torch.Tensor, params: list[SamplingParams], generators: list) -> torch.Tensor:
    """Next token of each row of `logits` [B, vocab]: int64 [B] on the logits' device."""
    logits = logits.float()
    tokens = logits.argmax(dim=-1)
    rows = [i for i, p in enumerate(params) if not p.greedy]
    if not rows:
        return tokens
    dev = logits.device
    chosen = [params[i] for i in rows]
    # Rows and per-row settings go to the device in one copy, as float32: the dtype the settings are
    # used in, and exact for row numbers and top_k (below 2**24); no float64 (some XPUs lack it).
    idx, temperature, top_k, top_p = upload(
        [rows, [p.temperature for p in chosen], [p.top_k for p in chosen], [p.top_p for p in chosen]], dev,
        torch.float32)
    idx = idx.long()
    sub = logits[idx] / temperature.unsqueeze(-1)
    # Decide on the host which masks apply, so a plain temperature batch costs no extra sort.
    if any(0 < p.top_k < sub.shape[-1] for p in chosen):
        sub = top_k_mask(sub, top_k.long())
    if any(p.top_p < 1 for p in chosen):
        sub = top_p_mask(sub, top_p.to(sub.dtype))
    probs = sub.softmax(dim=-1)
    noise = torch.empty_like(probs).exponential_()
    for j, i in enumerate(rows):
        if generators[i] is not None:
            noise[j].exponential_(generator=generators[i])
    noise.clamp_(min=1e-20)  # a zero draw would turn masked (p = 0) tokens into NaN
    tokens[idx] = (probs / noise).argmax(dim=-1)
    return tokens
