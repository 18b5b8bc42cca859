"""The per-device op set: reference by default, registered versions where present, env override."""

from __future__ import annotations

import pytest

from bringup.kernels import dispatch
from bringup.kernels.reference import OPS


def test_reference_everywhere_but_the_cpu_own_ops_by_default(monkeypatch):
    from bringup.kernels.cpu.registration import CPU_OPS

    monkeypatch.delenv(dispatch.ENV_VAR, raising=False)
    ops = dispatch.ops_for("cpu")
    assert ops.device_type == "cpu"
    for name, fn in OPS.items():
        if name in CPU_OPS:
            assert ops.implementations[name] == "cpu" and getattr(ops, name) is not fn
        else:
            assert ops.implementations[name] == "reference" and getattr(ops, name) is fn


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


def test_a_fast_single_sequence_scan_also_serves_the_varlen_op(monkeypatch):
    monkeypatch.delenv(dispatch.ENV_VAR, raising=False)
    import torch

    calls = []

    def fast_scan(*args, **kwargs):
        calls.append(args[0].shape[0])
        return OPS["mamba_chunk_scan"](*args, **kwargs)

    dispatch.ops_for("cpu")  # the CPU's own varlen scan is registered; this test needs it out of the way
    own_varlen = dispatch._REGISTRY.pop(("mamba_chunk_scan_varlen", "cpu"), None)
    dispatch.register("mamba_chunk_scan", "cpu", fast_scan, name="fla")
    try:
        ops = dispatch.ops_for("cpu")
        assert ops.implementations["mamba_chunk_scan_varlen"] == "fla per sequence"
        T, H, P, G, N = 7, 4, 3, 2, 5
        args = (torch.randn(T, H, P), torch.randn(T, H), -torch.rand(H), torch.randn(T, G, N), torch.randn(T, G, N))
        states, D = torch.randn(2, H, P, N), torch.randn(H)
        y, finals = ops.mamba_chunk_scan_varlen(*args, [0, 3, 7], 4, D, None, states)
        y_ref, finals_ref = OPS["mamba_chunk_scan_varlen"](*args, [0, 3, 7], 4, D, None, states)
        assert calls == [3, 4]  # one call per sequence, through the registered scan
        torch.testing.assert_close(y, y_ref, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(finals, finals_ref, rtol=1e-4, atol=1e-4)
    finally:
        dispatch.unregister("mamba_chunk_scan", "cpu")
        if own_varlen is not None:
            dispatch._REGISTRY[("mamba_chunk_scan_varlen", "cpu")] = own_varlen
