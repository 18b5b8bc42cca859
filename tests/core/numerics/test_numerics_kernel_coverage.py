"""check-kernels covers every kernel the engine calls: each op of the dispatch namespace the model
calls, in each phase it calls it (a prompt, a decode step), and each variant (sliding window, sinks,
softcap) -- for the fused MoE forms a GPU hands out and for the linear-attention and SWA families
(the bundled model: tests/core/numerics/test_numerics_kernels.py). A kernel it cannot check is a finding, never a
silent gap."""

from __future__ import annotations

import pytest

from bringup.core.numerics import kernel_calls
from bringup.core.numerics.check_kernels import result_findings
from bringup.core.numerics.kernels_child import check_engine
from bringup.kernels.reference import OPS
from bringup.kernels.reference.moe_experts import moe_experts_unsummed

from engine_helpers import tiny_lfm2, tiny_nemotron_h, tiny_qwen3_next, tiny_sliding
from kernel_check_helpers import (DEVICE, engine_for, kernels_the_engine_calls, tiny_gemma2, tiny_jamba,
                                  tiny_kimi_linear, tiny_minimax)

pytestmark = pytest.mark.slow  # starts real engines


@pytest.fixture(scope="module")
def nemotron(tmp_path_factory):
    return tiny_nemotron_h(tmp_path_factory.mktemp("nemotron") / "tiny")


def _shared_whole(x, weights, ids, up, down, shared_up, shared_down, act="relu2"):
    # The layout the GPU kernel returns above its GEMV size: the shared expert whole [T, H], not in slices.
    return OPS["mlp"](x, shared_up, shared_down, None, act), moe_experts_unsummed(x, weights, ids, up, down, None, act)


def test_the_fused_moe_with_its_shared_expert_is_checked_at_prefill_and_decode_sizes(nemotron, monkeypatch):
    # A GPU's namespace carries moe_experts_shared_unsummed (the GEMV kernel up to 4 tokens, the
    # sorted GEMMs above); the model then calls it instead of moe_experts + mlp. Given here in the
    # layout of the GPU's prefill path, it is checked as itself, in both phases, against the reference
    # in slices (compared as the model sums the parts).
    # A batch of prompts (on a GPU by default) adds the sizes where the kernels take their large-batch
    # forms: 8 prompts of 40 tokens in all in one forward, then 8 tokens per decode step.
    engine = engine_for(nemotron, long_prefill=40)
    engine.model.ops.moe_experts_shared_unsummed = _shared_whole
    del engine.model.ops.moe_experts_shared  # the CPU's summed form, which a GPU's namespace lacks
    rows = {row["key"]: row for row in check_engine(engine, long_prefill=40)}
    fused = {row["phase"]: row for row in rows.values() if row["name"] == "moe_experts_shared_unsummed"}
    assert set(fused) == {"prefill", "decode", "long prefill", "batch decode"} and len(fused) == 4
    assert all(row["ok"] and row["max_rel_err"] < 1e-5 for row in fused.values())
    assert fused["decode"]["shape"][0] == 1 and 1 < fused["prefill"]["shape"][0] < 40
    assert fused["long prefill"]["shape"][0] == 40 and fused["batch decode"]["shape"][0] == 8
    scan = [row for row in rows.values() if row["name"] == "mamba_chunk_scan_varlen" and row["phase"] == "long prefill"]
    assert scan and scan[0]["shape"][0] == 40  # one varlen scan over the 8 prompts
    assert not any(row["name"] == "moe_experts" for row in rows.values())  # not what the model called

    # An extra form the check has no reference for is a row and a finding, not a gap.
    monkeypatch.setattr(kernel_calls, "_extra_references", dict)
    rows = list(check_engine(engine))
    unchecked = [row for row in rows if row["name"] == "moe_experts_shared_unsummed"]
    assert len(unchecked) == 2 and all(row["verdict"] == "no reference" and not row["ok"] for row in unchecked)
    findings = result_findings(rows, DEVICE)
    assert [f.code for f in findings] == ["KERNEL_UNCHECKED"] * 2
    assert "moe_experts_shared_unsummed (decode)" in findings[1].explanation


# family -> (builder, rows that must be among its check's keys: `op@phase` stands for any variant of it)
FAMILIES = {
    "qwen3_next": (tiny_qwen3_next, {"gated_delta_rule_chunk@prefill", "causal_conv1d_varlen_inplace@prefill",
                                     "gated_delta_rule_recurrent_inplace@decode",
                                     "causal_conv1d_update_inplace@decode", "moe_experts@prefill", "moe_experts@decode"}),
    "minimax": (tiny_minimax, {"lightning_attention_chunk@prefill", "lightning_attention_recurrent_inplace@decode"}),
    "jamba": (tiny_jamba, {"selective_scan_varlen@prefill", "selective_state_update_inplace@decode"}),
    "kimi_linear": (tiny_kimi_linear, {"kda_chunk@prefill", "kda_recurrent_inplace@decode",
                                       "causal_conv1d_varlen_inplace@prefill", "paged_attention_prefill@prefill",
                                       "paged_attention_decode@decode"}),
    "lfm2": (tiny_lfm2, {"causal_conv1d_varlen@prefill", "causal_conv1d_update_inplace@decode"}),
    "gpt_oss": (lambda folder: tiny_sliding(folder, "gpt_oss", window=8), {
        "paged_attention_prefill@prefill:sliding_window=8 sinks", "paged_attention_prefill@prefill:sinks",
        "paged_attention_decode@decode:sliding_window=8 sinks", "paged_attention_decode@decode:sinks"}),
    "gemma2": (tiny_gemma2, {"paged_attention_prefill@prefill:sliding_window=8 softcap=5.0",
                             "paged_attention_prefill@prefill:softcap=5.0",
                             "paged_attention_decode@decode:sliding_window=8 softcap=5.0",
                             "paged_attention_decode@decode:softcap=5.0"}),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_s_own_kernels_and_variants_are_checked(family, tmp_path):
    builder, expected = FAMILIES[family]
    engine = engine_for(builder(tmp_path / family))
    rows = list(check_engine(engine))
    keys = {row["key"] for row in rows}
    missing = [e for e in expected if not any(key == e or (":" not in e and key.startswith(e + ":")) for key in keys)]
    assert not missing, f"missing: {missing}; checked: {sorted(keys)}"
    assert {(row["name"], row["phase"]) for row in rows} >= kernels_the_engine_calls(engine)
    assert all(row["ok"] for row in rows), [row for row in rows if not row["ok"]]
