"""Every family the engine runs builds, loads (dummy weights) and generates on the CPU in float32,
bfloat16 and float16, from each of its tiny test configs. A family's mixed-dtype parameters are
declared (its `keep_float32`), not found by a crash: every parameter holds the model's dtype except
those, which hold float32 (gpt-oss's router crashed in bf16 and fp16 with `mat1 and mat2 must have
the same dtype` before its logits were computed in its float32)."""

from __future__ import annotations

import json

import pytest
import torch

from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams

from tiny_family_configs import tiny_family_configs

pytestmark = pytest.mark.slow  # an engine per family and dtype (tenths of a second each)
pytest.importorskip("transformers")

CONFIGS = tiny_family_configs()
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name, config", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_each_family_generates_in_each_dtype_on_dummy_weights(name, config, dtype, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(config))
    engine = Engine(EngineConfig(str(tmp_path), device="cpu", dtype=dtype, load_format="dummy", cpu_compile=False,
                                 max_running_requests=4, chunked_prefill_size=8), log=lambda m: None)
    model, want = engine.model, DTYPES[dtype]
    for pname, param in model.named_parameters():
        kept = any(key in pname for key in model.keep_float32)
        assert param.dtype == (torch.float32 if kept else want), (
            f"{name}: {pname} is {param.dtype}; the family declares float32 for {model.keep_float32 or 'nothing'}")
    vocab = int(config["vocab_size"])
    prompts = [[(7 * i) % (vocab - 3) + 3 for i in range(11)], [5, 6, 7]]  # one prompt chunked (8 per step)
    out = engine.generate(prompts, SamplingParams(max_new_tokens=4, temperature=0, ignore_eos=True))
    assert [len(o) for o in out] == [4, 4] and all(0 <= t < vocab for o in out for t in o)
    engine.check_pools()
