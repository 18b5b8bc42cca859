"""`bringup check-kernels`: the kernels a model really runs, replayed against the float32 reference."""

from __future__ import annotations

import contextlib
import html
import io
import json
from pathlib import Path

import pytest
import torch

from bringup.cli import main
from bringup.core.sources.default_model import resolve_default
from bringup.core.numerics.kernel_calls import KernelCall, record_calls, replay
from bringup.core.numerics.kernel_rows import row_label
from bringup.kernels.dispatch import ops_for
from bringup.kernels.reference import OPS

from kernel_check_helpers import engine_for, kernels_the_engine_calls


@pytest.fixture(scope="module")
def bundled_check():
    """`bringup check-kernels default --json` (the bundled model, bfloat16, CPU) with one kernel call
    (the prompt's MoE) made to kill its child: (exit code, JSON document)."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as env, contextlib.redirect_stdout(out):
        env.setenv("BRINGUP_KERNEL_CHECK_CRASH", "moe_experts_shared@prefill")
        code = main(["check-kernels", "default", "--device", "cpu", "--dtype", "bfloat16", "--json"])
    return code, json.loads(out.getvalue())


def test_every_kernel_of_a_hybrid_model_is_checked_on_cpu_and_a_crash_is_a_finding(bundled_check, no_orphans):
    # The crashed call becomes a finding, and a fresh child checks the rest without it, the decode
    # step's MoE included.
    code, report = bundled_check
    assert code == 1
    assert not report["ok"] and report["device"] == "cpu"
    kernels = {(k["name"], k["phase"]): k for k in report["kernels"]}
    assert len(kernels) == len(report["kernels"])  # every layer calls an op alike: one row per op and phase
    # prefill and decode of Mamba2, attention, MoE and the norms: what the engine really called,
    # each op the model calls in both phases checked at both sizes
    # (the MoE: its shared and routed experts in one CPU op, moe_experts_shared)
    both = {"add_rms_norm", "gated_rms_norm", "router_logits", "route_sigmoid_grouped", "moe_experts_shared",
            "kv_cache_write"}
    assert {(op, phase) for op in both for phase in ("prefill", "decode")} | {
        ("mamba_chunk_scan_varlen", "prefill"), ("causal_conv1d_varlen_inplace", "prefill"),
        ("paged_attention_prefill", "prefill"), ("mamba_state_update_inplace", "decode"),
        ("causal_conv1d_update_inplace", "decode"), ("paged_attention_decode", "decode")} == set(kernels)
    assert kernels["gated_rms_norm", "prefill"]["shape"][0] > 1 and kernels["moe_experts_shared", "decode"]["shape"][0] == 1
    crashed = kernels["moe_experts_shared", "prefill"]
    assert crashed["verdict"] == "crashed" and not crashed["ok"]
    assert kernels["moe_experts_shared", "decode"]["ok"]
    assert all(k["ok"] for key, k in kernels.items() if key != ("moe_experts_shared", "prefill"))
    assert [f["code"] for f in report["findings"]] == ["KERNEL_CRASHED"]
    assert "kernel moe_experts_shared (prefill) on cpu: the process was killed by SIGSEGV" in report["findings"][0]["message"]
    attention = kernels["paged_attention_prefill", "prefill"]
    config = json.loads((Path(resolve_default("default")) / "config.json").read_text())
    assert attention["dtype"] == "bfloat16"
    assert attention["shape"][1:] == [config["num_attention_heads"], config["head_dim"]]  # the model's own shapes
    assert 0 < attention["max_rel_err"] <= attention["tolerance"]  # bfloat16 against float32: close, not equal

    # The exported session report shows the check: every kernel call a row, the crashed one red, with its finding.
    from bringup.core.numerics.error_bands import ERROR_COLORS
    from bringup.core.session_report import SessionRecord, render_html

    page = render_html(SessionRecord(numerics={"kernels": report}))
    assert "<h2>Kernel check</h2>" in page and "cpu: FAILED" in page
    assert all(f"<td>{html.escape(row_label(k))}</td>" in page for k in kernels.values())
    assert "<td>route_sigmoid_grouped (decode) [routed_scaling_factor=2.5]</td>" in page
    assert page.count(f"background:{ERROR_COLORS['beyond']}") == 1 and "KERNEL_CRASHED" not in page
    assert "the process was killed by SIGSEGV" in page


def test_check_kernels_leaves_out_no_kernel_the_engine_calls_for_the_bundled_model(bundled_check):
    # Every op of the dispatch namespace the engine calls for the bundled model, in each phase, is a
    # row of check-kernels' result (a new op, or an extra form such as a fused MoE's, that the
    # recorder missed fails here); the crashed call is a row too, with its finding.
    _, report = bundled_check
    checked = {(k["name"], k["phase"]) for k in report["kernels"]}
    called = kernels_the_engine_calls(engine_for(resolve_default("default"), "bfloat16", device="cpu"))
    assert called and called <= checked, f"called but not checked: {sorted(called - checked)}"
    assert {phase for _, phase in called} == {"prefill", "decode"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (its namespace has the fused MoE forms)")
def test_on_a_gpu_check_kernels_checks_what_the_gpu_engine_calls(no_orphans):
    # There the model calls moe_experts_shared_unsummed (the GEMV kernel at decode, the sorted GEMMs
    # at prefill), router_logits' kernel, the in-place conv...: each op and phase must be a row.
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["check-kernels", "default", "--device", "cuda", "--dtype", "bfloat16", "--json"])
    report = json.loads(out.getvalue())
    assert code == 0 and report["ok"], report["findings"]
    checked = {(k["name"], k["phase"]) for k in report["kernels"]}
    called = kernels_the_engine_calls(engine_for(resolve_default("default"), "bfloat16", device="cuda"))
    assert called <= checked, f"called but not checked: {sorted(called - checked)}"
    assert {("moe_experts_shared_unsummed", "decode"), ("moe_experts_shared_unsummed", "prefill")} <= checked


def test_a_negative_long_prompt_is_refused_before_any_child(capsys):
    assert main(["check-kernels", "default", "--prefill-tokens", "-5"]) == 2
    assert "--prefill-tokens -5 must be 0 or more" in capsys.readouterr().err


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


def test_a_fused_moe_called_unsummed_is_checked_against_its_own_reference(monkeypatch):
    # On a GPU the model calls the fused MoE's unsummed form (dispatch's extra op, outside
    # `implementations`); the check records it under its own name and replays it against the
    # unsummed reference, compared as the model sums it.
    from bringup.core.numerics.kernel_calls import reference_for

    monkeypatch.setenv("BRINGUP_KERNELS", "reference")  # the reference MoE beside the fake fused form
    ops = ops_for("cpu")
    ops.moe_experts_unsummed = lambda *args, **kwargs: OPS["moe_experts"](*args, **kwargs)[:, None, :]  # summed early
    calls, undo = record_calls(ops)
    x, up, down = torch.randn(3, 8), torch.randn(4, 16, 8), torch.randn(4, 8, 16)
    weights, ids = torch.rand(3, 2), torch.tensor([[0, 1], [2, 3], [1, 2]])
    try:
        ops.moe_experts_unsummed(x, weights, ids, up, down, None, "relu2")
    finally:
        undo()
    assert [(c.op, c.implementation, c.phase) for c in calls] == [("moe_experts_unsummed", "reference", "prefill")]
    reference, combine = reference_for("moe_experts_unsummed")
    assert reference(x, weights, ids, up, down).shape == (3, 2, 8)
    assert replay(calls[0], ops.moe_experts_unsummed, reference, "cpu", combine=combine)["ok"]
    wrong = replay(calls[0], lambda *a: reference(*a) * 1.1, reference, "cpu", combine=combine)
    assert not wrong["ok"]
