"""`--load-format dummy` for every issue-10 family: a folder holding only config.json (tiny
variants of Granite-4.0-H with and without experts, Bamba, Falcon-H1, Zamba2, Jamba, Gemma 2,
Gemma 3 text, gpt-oss) starts an engine with seeded random weights, whatever the family derives
after loading (RoPE tables, Falcon-H1's folded multipliers, Gemma's 1 + w norms) included, and
generates: the same greedy ids batched as one at a time, every id in the vocabulary, pools empty.
The embedded target's rules (read from the engine's registry) pass the same config."""

from __future__ import annotations

import pytest
import torch

from bringup.core.engine.dummy_weights import DEFAULT_SEED, fill_dummy_
from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.loader import build_model
from bringup.core.engine.sampling import SamplingParams
from bringup.core.rules import LaunchSettings
from bringup.core.validate import validate
from bringup.core.sources.resolve import load_layer_map

from engine_helpers import prompts_of_lengths
from family_checkpoints import FAMILIES, family_config

pytestmark = pytest.mark.slow  # runs a real engine per family
pytest.importorskip("transformers")
VOCAB = 300  # wider than the bundled tokenizer: the dummy tokenizer must cover it


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_generates_on_dummy_weights(name, tmp_path):
    config = family_config(name, VOCAB)
    config.save_pretrained(str(tmp_path))  # config.json only: no weights, no tokenizer
    rules = validate(load_layer_map(str(tmp_path)), "embedded", LaunchSettings(device="cpu"))
    assert rules.ok, [f.code for f in rules.findings if f.severity == "error"]
    engine = Engine(EngineConfig(str(tmp_path), device="cpu", dtype="float32", load_format="dummy",
                                 max_running_requests=4, chunked_prefill_size=8), log=lambda m: None)
    info = engine.server_info()
    assert info["load_format"] == "dummy" and info["weights_source"].startswith("dummy")
    # What the family derives after loading is derived from the dummy weights too: the engine's model
    # equals a fresh build filled with the same seed and then finished as a checkpoint load finishes it.
    fresh = build_model(config.to_dict(), device="cpu", dtype=torch.float32)
    fill_dummy_(fresh, config.to_dict(), DEFAULT_SEED)
    fresh.finish_loading()
    ours = dict(engine.model.named_parameters()) | dict(engine.model.named_buffers())
    for tname, want in list(fresh.named_parameters()) + list(fresh.named_buffers()):
        assert torch.isfinite(ours[tname]).all(), f"{name}: {tname} is not finite after the dummy load"
        assert torch.equal(ours[tname], want), f"{name}: {tname} is not what finish_loading makes of the dummy weights"
    prompts = prompts_of_lengths([30, 3, 17], VOCAB, seed=5)
    params = SamplingParams(max_new_tokens=5, temperature=0, ignore_eos=True)
    batched = engine.generate(prompts, params)
    assert [len(o) for o in batched] == [5, 5, 5]
    assert all(0 <= t < VOCAB for o in batched for t in o)
    assert batched == [engine.generate([p], params)[0] for p in prompts]
    engine.check_pools()
    stats = engine.stats()
    assert stats["kv_tokens_used"] == stats["swa_tokens_used"] == stats["state_slots_used"] == 0


def _bench(tmp_path, capsys, name):
    import json

    from bringup.cli import main

    family_config(name, VOCAB).save_pretrained(str(tmp_path))
    code = main(["bench", str(tmp_path), "--load-format", "dummy", "--device", "cpu", "--num-seqs", "2",
                 "--input-len", "6", "--output-len", "3", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out)
    assert result["output_tokens"] == 6 and result["baseline_tok_s"] > 0
    return captured.err


def test_bench_on_dummy_weights_runs_transformers_on_the_engines_weights_for_fused_experts(tmp_path, capsys):
    # transformers fuses Jamba's experts, which the engine holds one by one: the twin copies them anyway
    assert "cannot be copied" not in _bench(tmp_path, capsys, "jamba")


def test_bench_falls_back_to_same_shapes_where_the_twin_cannot_be_built(tmp_path, capsys, monkeypatch):
    from bringup.core.bench import hf_twin
    from bringup.core.errors import UserError

    def refuse(*args, **kwargs):  # a family whose tensors the twin cannot place (none of the tiny ones now)
        raise UserError("transformers' x has no counterpart in the engine's model")

    monkeypatch.setattr(hf_twin, "transformers_twin", refuse)
    err = _bench(tmp_path, capsys, "jamba")
    assert "the baseline runs transformers' own random weights of the same shapes" in err


def test_gemma_dummy_norms_scale_by_one_as_gemma_initialises_them(tmp_path):
    family_config("gemma3_text", VOCAB).save_pretrained(str(tmp_path))
    config = EngineConfig(str(tmp_path), device="cpu", dtype="float32", load_format="dummy")
    model = Engine(config, log=lambda m: None).model
    norms = {n: p for n, p in model.named_parameters() if "norm" in n}
    assert norms and all(torch.equal(p, torch.ones_like(p)) for p in norms.values())  # stored 1 + w, w = 0
