"""Every family's residual adds run fused with the next norm (ops.add_rms_norm), Granite's scaled
residuals and MiniMax's post-norm alpha/beta ones included, and the fused loop computes exactly what
each layer's own forward computes (float32, reference kernels): the same logits at every step.
Only Zamba2's hybrid layers, which run a shared block, keep their own loop."""

from __future__ import annotations

import pytest
import torch
from models_helpers import run_engine, standard_requests

from bringup.core.engine.dummy_weights import fill_dummy_
from bringup.core.engine.loader import build_model
from bringup.core.engine.models import decoder_config

from tiny_family_configs import tiny_family_configs

pytest.importorskip("transformers")
CONFIGS = [(n, c) for n, c in tiny_family_configs() if not n.startswith("hybrid-zamba2")]


def _model(config):
    config = decoder_config(config)
    model = build_model(config, device="cpu", dtype=torch.float32)
    fill_dummy_(model, config, 3)
    model.finish_loading()
    return model


@pytest.mark.parametrize("name, config", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_the_fused_residual_loop_is_each_layers_own_forward(name, config, monkeypatch):
    model = _model(config)
    calls = []
    fused = model.ops.add_rms_norm
    monkeypatch.setattr(model.ops, "add_rms_norm", lambda *a, **k: calls.append(1) or fused(*a, **k))
    forwards = []
    handle = model.register_forward_pre_hook(lambda *_: forwards.append(1))
    vocab = int(config["vocab_size"])
    got = run_engine(model, standard_requests(vocab, seed=4)[:2])
    handle.remove()
    parts = sum(1 for layer in model.layer_map.layers for kind in (layer.mixer, layer.ffn) if kind != "none")
    # One fused add per part and one for the final norm, in every forward.
    assert len(calls) == len(forwards) * (parts + 1), f"{name}: {len(calls)} fused adds in {len(forwards)} forwards"
    model.block_hook = lambda layer, hidden: hidden  # a hook takes the layers' own forward
    want = run_engine(model, standard_requests(vocab, seed=4)[:2])
    for g, w in zip(got, want):
        assert g.tokens == w.tokens
        for a, b in zip(g.logits, w.logits):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
