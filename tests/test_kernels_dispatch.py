"""The per-device op set: reference by default, registered versions where present, env override."""

from __future__ import annotations

import pytest

from bringup.kernels import dispatch
from bringup.kernels.reference import OPS


def test_reference_everywhere_by_default(monkeypatch):
    monkeypatch.delenv(dispatch.ENV_VAR, raising=False)
    ops = dispatch.ops_for("cpu")
    assert ops.device_type == "cpu"
    assert set(ops.implementations.values()) == {"reference"}
    for name, fn in OPS.items():
        assert getattr(ops, name) is fn


def test_registered_version_replaces_reference_on_its_device_only(monkeypatch):
    monkeypatch.delenv(dispatch.ENV_VAR, raising=False)

    def fast_rms_norm(*a, **k):
        return OPS["rms_norm"](*a, **k)

    dispatch.register("rms_norm", "cuda", fast_rms_norm, name="triton")
    try:
        cuda = dispatch.ops_for("cuda:1")
        assert cuda.rms_norm is fast_rms_norm and cuda.implementations["rms_norm"] == "triton"
        assert dispatch.ops_for("cpu").rms_norm is OPS["rms_norm"]
        monkeypatch.setenv(dispatch.ENV_VAR, "reference")
        assert dispatch.ops_for("cuda").rms_norm is OPS["rms_norm"]
    finally:
        dispatch.unregister("rms_norm", "cuda")


def test_unknown_op_and_bad_env_are_refused(monkeypatch):
    with pytest.raises(ValueError, match="unknown kernel op 'flash'"):
        dispatch.register("flash", "cuda", print, name="x")
    monkeypatch.setenv(dispatch.ENV_VAR, "fastest")
    with pytest.raises(ValueError, match="BRINGUP_KERNELS='fastest'"):
        dispatch.ops_for("cpu")


def test_default_device_is_the_current_accelerator_or_cpu():
    assert dispatch.device_type_of(None) in ("cpu", "cuda", "xpu", "mps", "hpu", "mtia")
