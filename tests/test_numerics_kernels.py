"""`bringup check-kernels`: the kernels a model really runs, replayed against the float32 reference."""

from __future__ import annotations

import json

import pytest
import torch

from bringup.cli import main
from bringup.core.numerics.kernel_calls import KernelCall, record_calls, replay
from bringup.kernels.dispatch import ops_for
from bringup.kernels.reference import OPS

from engine_helpers import tiny_nemotron_h


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_nemotron_h(tmp_path_factory.mktemp("kernels") / "tiny")


def test_every_kernel_of_a_hybrid_model_is_checked_on_cpu_and_a_crash_is_a_finding(checkpoint, capsys, monkeypatch,
                                                                                 no_orphans):
    # One kernel is made to kill the child: it becomes a finding, and a fresh child checks the rest.
    monkeypatch.setenv("BRINGUP_KERNEL_CHECK_CRASH", "moe_experts")
    assert main(["check-kernels", str(checkpoint), "--device", "cpu", "--dtype", "bfloat16", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"] and report["device"] == "cpu"
    kernels = {k["name"]: k for k in report["kernels"]}
    # prefill and decode of Mamba2, attention, MoE, MLP and the norms: what the engine really called
    assert {"mamba_chunk_scan_varlen", "causal_conv1d_varlen_inplace", "mamba_state_update_inplace",
            "causal_conv1d_update_inplace", "paged_attention_prefill", "paged_attention_decode", "kv_cache_write",
            "moe_experts", "route_sigmoid_grouped", "mlp", "add_rms_norm", "gated_rms_norm"} <= set(kernels)
    assert kernels["moe_experts"]["verdict"] == "crashed" and not kernels["moe_experts"]["ok"]
    assert all(k["ok"] for name, k in kernels.items() if name != "moe_experts")
    assert [f["code"] for f in report["findings"]] == ["KERNEL_CRASHED"]
    assert "kernel moe_experts on cpu: the process was killed by SIGSEGV" in report["findings"][0]["message"]
    attention = kernels["paged_attention_prefill"]
    config = json.loads((checkpoint / "config.json").read_text())
    assert attention["dtype"] == "bfloat16"
    assert attention["shape"][1:] == [config["num_attention_heads"], config["head_dim"]]  # the model's own shapes
    assert 0 < attention["max_rel_err"] <= attention["tolerance"]  # bfloat16 against float32: close, not equal

    # The exported session report shows the check: every kernel a row, the crashed one red, with its finding.
    from bringup.core.numerics.error_bands import ERROR_COLORS
    from bringup.core.session_report import SessionRecord, render_html

    page = render_html(SessionRecord(numerics={"kernels": report}))
    assert "<h2>Kernel check</h2>" in page and "cpu: FAILED" in page
    assert all(f"<td>{name}</td>" in page for name in kernels)
    assert page.count(f"background:{ERROR_COLORS['beyond']}") == 1 and "KERNEL_CRASHED" not in page
    assert "the process was killed by SIGSEGV" in page


def test_a_wrong_kernel_fails_its_check():
    ops = ops_for("cpu")
    calls, undo = record_calls(ops)
    x = torch.randn(6, 32, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    try:
        ops.rms_norm(x, torch.ones(32, dtype=torch.bfloat16), 1e-6)
        ops.rms_norm(x, torch.ones(32, dtype=torch.bfloat16), 1e-6)
    finally:
        undo()
    assert [c.op for c in calls] == ["rms_norm"]  # the first call of each op
    good = replay(calls[0], OPS["rms_norm"], OPS["rms_norm"], "cpu")
    assert good["ok"] and good["dtype"] == "bfloat16" and good["shape"] == [6, 32]
    bad = replay(calls[0], lambda x, w, eps: OPS["rms_norm"](x, w, eps) * 1.1, OPS["rms_norm"], "cpu")
    # 10 % off everywhere: far beyond bf16's tolerance (the exact figure moves with bf16 rounding of the inputs).
    assert not bad["ok"] and bad["max_rel_err"] > 2 * bad["tolerance"]


def test_an_in_place_kernel_is_judged_by_what_it_wrote():
    states = torch.zeros(4, 8)
    call = KernelCall("fill", "test", (states, torch.tensor([1])), {})

    def writes_slot(s, idx):
        s[idx] = 1.0

    def writes_nothing(s, idx):
        pass

    assert not replay(call, writes_nothing, writes_slot, "cpu")["ok"]
    assert replay(call, writes_slot, writes_slot, "cpu")["ok"]


def test_a_fused_moe_called_unsummed_is_checked_as_moe_experts():
    # On a GPU the model calls the fused MoE's unsummed form (dispatch's extra op, outside
    # `implementations`); the check must still see it, as moe_experts with the same arguments.
    ops = ops_for("cpu")
    ops.moe_experts_unsummed = lambda *args, **kwargs: OPS["moe_experts"](*args, **kwargs)
    calls, undo = record_calls(ops)
    x, up, down = torch.randn(3, 8), torch.randn(4, 16, 8), torch.randn(4, 8, 16)
    weights, ids = torch.rand(3, 2), torch.tensor([[0, 1], [2, 3], [1, 2]])
    try:
        ops.moe_experts_unsummed(x, weights, ids, up, down, None, "relu2")
    finally:
        undo()
    assert [c.op for c in calls] == ["moe_experts"]
    assert replay(calls[0], OPS["moe_experts"], OPS["moe_experts"], "cpu")["ok"]
