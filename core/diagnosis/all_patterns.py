"""Every pattern Diagnose tries: the catalogue (SGLang, our engine, torch, transformers) and the
modules by source added beside it (the XPU sequence, state capacity and parallelism, vLLM)."""

from __future__ import annotations

from .catalogue import PATTERNS as CATALOGUE
from .pattern import Pattern
from .patterns_state import STATE
from .patterns_vllm import VLLM
from .patterns_xpu import XPU

PATTERNS: tuple[Pattern, ...] = CATALOGUE + XPU + STATE + VLLM


def codes() -> list[str]:
    """Every finding code Diagnose can produce from one line, once each."""
    return list(dict.fromkeys(p.code for p in PATTERNS)) + ["UNRECOGNIZED_ERROR"]
