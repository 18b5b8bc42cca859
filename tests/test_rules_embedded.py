"""The embedded engine's rules come from the engine itself."""

from __future__ import annotations

import pytest
from rules_helpers import LFM2, NANO, codes, finding, run

from bringup.core.rules.embedded import engine_model_types


def test_model_types_are_the_engine_registry():
    from bringup.core.engine.models import MODEL_REGISTRY

    assert set(engine_model_types()) == set(MODEL_REGISTRY)
    assert "nemotron_h" in MODEL_REGISTRY


def test_unsupported_model_uses_the_engine_text():
    from bringup.core.engine.models import UnsupportedModelError, model_class_for
    from rules_helpers import layer_map

    r = run(LFM2, "embedded", device="cpu")
    f = finding(r, "EMBEDDED_MODEL_UNSUPPORTED")
    with pytest.raises(UnsupportedModelError) as err:
        model_class_for(layer_map(LFM2).config)
    assert f.engine_message == f"UnsupportedModelError: {err.value}"


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
