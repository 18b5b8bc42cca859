"""The bytes a decode step must move, read off the map for any family (core/bench/step_bytes.py):
on Nemotron-3-Nano they are exactly what bench/nano_full.py's own count gives; a sliding layer reads
its window's KV only, an MoE layer the experts B tokens pick, a tied embedding whole."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from bringup.core.bench.step_bytes import step_bytes
from bringup.core.engine.models import model_class_for
from bringup.core.families import build_layer_map
from bringup.kernels.dispatch import ops_for

from repo_paths import REPO, SHARED_MODELS


def _meta_model(name: str):
    config = json.loads((SHARED_MODELS / name).read_text())
    with torch.device("meta"):
        model = model_class_for(config)(config, ops_for("cpu"), build_layer_map(config))
    return model.to(torch.bfloat16), config


@pytest.mark.parametrize("batch", [1, 32])
def test_nemotron_nano_step_bytes_equal_nano_fulls_own_count(batch):
    sys.path.insert(0, str(REPO / "bench"))
    from nano_full import step_bytes as nano_step_bytes

    model, config = _meta_model("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json")
    ours, theirs = step_bytes(model, batch, 192), nano_step_bytes(model, config, batch, 192)
    assert {k: round(v) for k, v in ours.items() if k != "experts_touched"} == \
        {k: round(v) for k, v in theirs.items() if k != "experts_touched"}
    assert ours["experts_touched"] == pytest.approx(theirs["experts_touched"])


def test_sliding_layers_read_their_window_and_experts_grow_with_the_batch():
    model, _ = _meta_model("openai__gpt-oss-20b.json")
    layers = model.layer_map.layers
    full = sum(l.kv_elems_per_token for l in layers if l.mixer == "attention") * 2
    sliding = sum(l.kv_elems_per_token for l in layers if l.mixer == "sliding_attention") * 2
    window = next(l.attention.window for l in layers if l.mixer == "sliding_attention")
    assert step_bytes(model, 1, 8192)["kv"] == 8192 * full + window * sliding
    one, many = step_bytes(model, 1, 64), step_bytes(model, 32, 64)
    assert one["experts_touched"] == 4 and 4 < many["experts_touched"] < 32
    assert one["weights"] < many["weights"]  # 32 embedding rows instead of one


def test_a_tied_embedding_is_read_whole():
    model, config = _meta_model("google__gemma-3-1b-it.json")
    assert model.tied
    embedding = model.input_embedding.weight
    assert step_bytes(model, 1, 16)["weights"] >= embedding.numel() * embedding.element_size()
