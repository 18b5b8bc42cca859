"""Shared helpers of the layer-map tests: where the real configs live and what EXPECTED.md says."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from repo_paths import REPO, SHARED_MODELS


def shared_config(file_name: str) -> dict:
    return json.loads((SHARED_MODELS / file_name).read_text())


def shared_files() -> list[Path]:
    return sorted(SHARED_MODELS.glob("*.json"))


@dataclass
class Expected:
    file: str
    model_type: str
    layers: int
    full_attention: list[int] | None  # None = "all"
    full_count: int
    sliding: list[int]
    state: int


def _ids(cell: str, layers: int) -> tuple[int, list[int] | None]:
    cell = cell.strip()
    if cell == "none":
        return 0, []
    m = re.fullmatch(r"all (\d+)", cell)
    if m:
        return int(m[1]), None
    m = re.fullmatch(r"(\d+): \[([\d, ]*)\]", cell)
    assert m, f"cannot read EXPECTED.md cell {cell!r}"
    ids = [int(x) for x in m[2].split(",")]
    assert len(ids) == int(m[1])
    return int(m[1]), ids


def expected_table() -> dict[str, Expected]:
    """Rows of the golden table in EXPECTED.md, keyed by file name."""
    rows = {}
    for line in (SHARED_MODELS / "EXPECTED.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not cells[0].startswith("`"):
            continue
        file, model_type, layers = cells[0].strip("`"), cells[1], int(cells[2])
        full_count, full = _ids(cells[3], layers)
        _, sliding = _ids(cells[4], layers)
        rows[file] = Expected(file, model_type, layers, full, full_count, sliding or [], int(cells[5]))
    return rows


# Gemma 4: the 26B-A4B (MoE beside a dense MLP in every layer) and a small E-series-like decoder
A4B_TEXT = dict(
    model_type="gemma4_text", hidden_size=2816, intermediate_size=2112, num_hidden_layers=30, num_attention_heads=16,
    num_key_value_heads=8, num_global_key_value_heads=2, head_dim=256, global_head_dim=512, attention_k_eq_v=True,
    enable_moe_block=True, num_experts=128, top_k_experts=8, moe_intermediate_size=704, sliding_window=1024,
    vocab_size=262144, hidden_size_per_layer_input=0, tie_word_embeddings=True,
)
A4B = {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "text_config": A4B_TEXT}
# A small E-series-like decoder: per-layer inputs, the last 4 layers reuse KV, double-wide MLP there.
SHARING_TEXT = dict(
    model_type="gemma4_text", hidden_size=128, intermediate_size=256, num_hidden_layers=12, num_attention_heads=4,
    num_key_value_heads=2, head_dim=32, global_head_dim=64, vocab_size=1000, vocab_size_per_layer_input=500,
    hidden_size_per_layer_input=16, num_kv_shared_layers=4, use_double_wide_mlp=True, sliding_window=64,
)
