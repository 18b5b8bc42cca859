"""A float32 model asks Triton for IEEE float32 dots on CUDA (Triton's default there is tf32, which
the tiny Zamba2 turns into 1e-2 logit errors), never overriding the user's own choice, and leaves
the CPU and XPU alone."""

from __future__ import annotations

import os

import pytest

from bringup.kernels.precision import F32_DOTS_ENV, full_precision_fp32_dots


def test_cuda_gets_ieee_float32_dots(monkeypatch):
    monkeypatch.delenv(F32_DOTS_ENV, raising=False)
    assert full_precision_fp32_dots("cuda")
    assert os.environ[F32_DOTS_ENV] == "ieee"


def test_the_users_setting_wins(monkeypatch):
    monkeypatch.setenv(F32_DOTS_ENV, "tf32x3")
    assert not full_precision_fp32_dots("cuda")
    assert os.environ[F32_DOTS_ENV] == "tf32x3"


@pytest.mark.parametrize("device_type", ["cpu", "xpu"])
def test_other_devices_keep_their_default(monkeypatch, device_type):
    monkeypatch.delenv(F32_DOTS_ENV, raising=False)
    assert not full_precision_fp32_dots(device_type)
    assert F32_DOTS_ENV not in os.environ


def test_building_a_float32_model_asks_for_it_on_the_models_device(monkeypatch):
    """build_model passes its device and dtype on (a CPU build here: the call is what is checked)."""
    from bringup.core.engine import loader
    from bringup.core.sources.default_model import DEFAULT_SPEC, build_config

    import torch

    seen = []
    monkeypatch.setattr(loader, "full_precision_fp32_dots", seen.append)

    config = build_config(DEFAULT_SPEC, 64).to_dict()
    loader.build_model(config, device="cpu", dtype=torch.float32)
    loader.build_model(config, device="cpu", dtype=torch.bfloat16)
    assert seen == ["cpu"]
