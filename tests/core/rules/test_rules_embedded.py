"""The embedded engine's rules come from the engine itself."""

from __future__ import annotations

import pytest
from rules_helpers import LFM2, NANO, codes, finding, run

from bringup.core.rules.embedded import engine_model_types


def test_model_types_are_the_engine_registry():
    from bringup.core.engine.facts import MODEL_CLASSES
    from bringup.core.engine.models import model_class_for

    assert set(engine_model_types()) == set(MODEL_CLASSES) and "nemotron_h" in MODEL_CLASSES
    for model_type, target in MODEL_CLASSES.items():  # every entry names a class the engine has
        assert model_class_for({"model_type": model_type}).__name__ == target.split(":")[1]


def test_engine_defaults_are_its_facts():
    """The engine's config defaults and `bringup serve`'s parser are what the facts say."""
    import argparse

    from bringup.core.cli import serve
    from bringup.core.engine import facts
    from bringup.core.engine.config import EngineConfig

    config = EngineConfig()
    assert config.page_size == facts.DEFAULT_PAGE_SIZE and config.ssm_dtype == facts.DEFAULT_SSM_DTYPE
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    args = parser.parse_args([])
    assert {o.flag: o.default for o in facts.SERVE_OPTIONS} == {
        o.flag: getattr(args, o.flag[2:].replace("-", "_")) for o in facts.SERVE_OPTIONS}


def test_validation_never_imports_torch():
    import subprocess
    import sys

    code = ("import sys; from bringup.core.validate import validate; from bringup.core.sources.resolve import load_layer_map; "
            "r = validate(load_layer_map('NVIDIA-Nemotron-3-Nano-30B-A3B'), 'embedded'); "
            "assert r.ok and 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unsupported_model_uses_the_engine_text(tmp_path):
    """Every real config in shared/models now runs in the engine: a Granite (dense) config, which the
    map reads but the engine has no class for, stands in for an unsupported model."""
    import json

    from bringup.core.engine.models import UnsupportedModelError, model_class_for
    from bringup.core.rules import LaunchSettings
    from bringup.core.validate import validate
    from bringup.core.sources.resolve import load_layer_map
    from rules_helpers import MODELS

    config = json.loads((MODELS / "meta-llama__Meta-Llama-3.1-8B.json").read_text())
    config.update(model_type="granite", architectures=["GraniteForCausalLM"])
    (tmp_path / "config.json").write_text(json.dumps(config))
    lm = load_layer_map(str(tmp_path / "config.json"))
    f = finding(validate(lm, "embedded", LaunchSettings(device="cpu")), "EMBEDDED_MODEL_UNSUPPORTED")
    with pytest.raises(UnsupportedModelError) as err:
        model_class_for(lm.config)
    assert f.engine_message == f"UnsupportedModelError: {err.value}"


@pytest.mark.parametrize("config", [LFM2, "Qwen__Qwen3-Next-80B-A3B-Instruct.json", "MiniMaxAI__MiniMax-M1.json",
                                    "moonshotai__Kimi-Linear-48B-A3B-Instruct.json"])
def test_linear_attention_hybrids_are_embedded_models(config):
    assert "EMBEDDED_MODEL_UNSUPPORTED" not in codes(run(config, "embedded", device="cpu"))


def test_nano_on_each_engine_device():
    for device in ("cpu", "cuda", "xpu"):
        r = run(NANO, "embedded", device=device)
        assert r.ok, codes(r)
        assert r.resolved.page_size == 16 and r.resolved.mamba_ssm_dtype == "float32"
        assert r.argv[:4] == ["bringup", "serve", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B", "--device"]
    assert "EMBEDDED_DEVICE" in codes(run(NANO, "embedded", device="npu"), "error")


def test_single_device_only_and_sglang_flags_do_not_apply():
    r = run(NANO, "embedded", device="cpu", tp=2, attention_backend="triton", mamba_strategy="extra_buffer",
            kv_dtype="fp8_e4m3")
    assert codes(r, "error") == ["EMBEDDED_PARALLEL", "EMBEDDED_KV_DTYPE"]
    assert "EMBEDDED_BACKEND_IGNORED" in codes(r, "warning")
    assert "EMBEDDED_NO_PREFIX_CACHE" in codes(r, "info")


def test_fp8_kv_message_is_the_engine_pools_own():
    from bringup.core.engine.pools import as_dtype

    with pytest.raises(ValueError) as err:
        as_dtype("fp8_e4m3")
    f = finding(run(NANO, "embedded", device="cpu", kv_dtype="fp8_e4m3"), "EMBEDDED_KV_DTYPE")
    assert f.engine_message == f"ValueError: {err.value}"


def test_engine_settings_reach_the_command_only_where_serve_has_the_option():
    import argparse

    from bringup.core.cli import serve

    parser = argparse.ArgumentParser()
    serve.configure(parser)
    options = {o for a in parser._actions for o in a.option_strings}
    r = run(NANO, "embedded", device="xpu", dtype="bfloat16", page_size=32, kv_dtype="bfloat16")
    assert r.resolved.kv_dtype == "bfloat16" and r.resolved.page_size == 32
    for flag, value in (("--page-size", "32"), ("--kv-dtype", "bfloat16")):
        if flag in options:
            assert f"{flag} {value}" in r.command
        else:
            assert flag not in r.command
            assert any(f.code == "EMBEDDED_FLAG_NOT_IN_SERVE" and flag in f.message for f in r.findings)
