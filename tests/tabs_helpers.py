"""Shared pieces of the tab tests: the real model configs of ../shared/models, read in place."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
NEMOTRON_NANO = MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"
LFM2 = MODELS / "LiquidAI__LFM2-2.6B.json"
QWEN3_NEXT = MODELS / "Qwen__Qwen3-Next-80B-A3B-Instruct.json"
LLAMA = MODELS / "meta-llama__Meta-Llama-3.1-8B.json"


@lru_cache(maxsize=None)
def layer_map(path: Path):
    from bringup.core.sources import load_layer_map

    return load_layer_map(str(path))
