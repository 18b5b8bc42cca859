"""SGLang logs of both generations (server_args.py up to 0.5.17, arg_groups/ from 0.5.19)."""

from __future__ import annotations

import pytest

from diagnose_helpers import codes, diagnose_file


def test_pr_32227_error_1_old_wording_on_xpu():
    result = diagnose_file("sglang-0.5.17-xpu-extra-buffer.log")
    assert codes(result) == ["EXTRA_BUFFER_PLATFORM"]
    f = result.findings[0]
    assert f.severity == "error" and f.details["platforms"] == "CUDA/MUSA/NPU/ROCm"
    assert f.matched == "AssertionError: extra_buffer needs CUDA/MUSA/NPU/ROCm (FLA)."  # not the assert's source line
    assert f.lines == (17, 18)
    assert "--disable-radix-cache" in f.fix and "#32227" in f.explanation
    assert result.facts["device"] == "xpu" and result.facts["mamba_radix_cache_strategy"] == "auto"
    assert not result.ok


def test_new_wording_of_the_platform_check():
    result = diagnose_file("sglang-0.5.22-extra-buffer-mps.log")
    assert codes(result) == ["EXTRA_BUFFER_PLATFORM"]
    assert "CPU, MPS and MLX" in result.findings[0].explanation
    assert result.findings[0].details["printed_by"] == "0.5.22 and later"


@pytest.mark.parametrize("line, code, releases", [
    ("AssertionError: extra_buffer needs CUDA/MUSA/NPU/ROCm (FLA).", "EXTRA_BUFFER_PLATFORM", "0.5.17 only"),
    ("AssertionError: extra_buffer needs CUDA/MUSA/NPU/ROCm/XPU (FLA).", "EXTRA_BUFFER_PLATFORM", "0.5.18 to 0.5.21"),
    ("AssertionError: extra_buffer needs CUDA/MUSA/NPU (FLA).", "EXTRA_BUFFER_PLATFORM", "a release before 0.5.17 or a fork"),
    ("AssertionError: extra_buffer requires platform support for Mamba cache state snapshots.", "EXTRA_BUFFER_PLATFORM",
     "0.5.22 and later"),
    ("ValueError: --mamba-radix-cache-strategy extra_buffer needs mamba state, got LlamaForCausalLM.",
     "STRATEGY_NEEDS_MAMBA", "0.5.21 and later"),
    ("AssertionError: no_buffer only supports page_size=1.", "NO_BUFFER_PAGE_SIZE", "0.5.17 and later"),
    ("AssertionError: NemotronHForCausalLM does not support triton attention backend,as the first layer might not be "
     "an attention layer", "TRITON_FIRST_LAYER_NOT_ATTENTION", "0.5.17 or 0.5.18"),
    ("AssertionError: Lfm2ForCausalLM does not support triton attention backend, as the first layer might not be an "
     "attention layer", "TRITON_FIRST_LAYER_NOT_ATTENTION", "0.5.17 and later"),
    ("Intel XPU attention backend for MLA Decode only supports page_sizes of [16, 32, 64, 128], changing page_size "
     "from 1 to 128.", "PAGE_SIZE_CHANGED", "0.5.17 to 0.5.19"),
    ("Intel XPU attention backend for MLA only supports page_sizes of [64, 128, 16, 32], changing page_size from 1 "
     "to 128.", "PAGE_SIZE_CHANGED", "0.5.20 and later"),
    ("Intel XPU attention backend only supports page_sizes of [64, 128], changing page_size from 1 to 128.",
     "PAGE_SIZE_CHANGED", "0.5.17 and later"),
])
def test_messages_are_labelled_with_the_releases_that_print_them(line, code, releases):
    """Read from the profiles, which are read from each release's wheel (issue 18)."""
    from bringup.core.diagnosis import diagnose

    found = [f for f in diagnose(line + "\n").findings if f.code == code]
    assert found, codes(diagnose(line + "\n"))
    assert found[0].details["printed_by"].startswith(releases)
    assert f"printed by sglang {releases}" in found[0].explanation


def test_extra_buffer_fixes_name_the_releases_for_xpu():
    from bringup.core.diagnosis import diagnose

    f = diagnose("AssertionError: extra_buffer is not supported for NemotronHForCausalLM; use no_buffer.\n").findings[0]
    assert "(sglang 0.5.20 and later) the device is XPU" in f.explanation
    assert "only sglang 0.5.18 or 0.5.19 run extra_buffer" in f.fix and "--disable-overlap-schedule" in f.fix


def test_pr_32227_error_2_every_rank_is_one_finding_and_wrappers_stay_quiet():
    result = diagnose_file("sglang-0.5.17-xpu-triton-layer0.log")
    assert codes(result) == ["LAYER_NOT_IN_FULL_ATTENTION"]  # no "Initialization failed" noise
    f = result.findings[0]
    assert f.lines == (22, 31)  # TP1 and TP0
    assert f.requested_layer == 0 and f.valid_layers == (5, 12, 19, 26, 33, 42)
    assert f.layers == (0, 5, 12, 19, 26, 33, 42)
    assert "upgrade sglang to 0.5.18 and later" in f.fix  # the traceback names triton_backend.py
    assert f.details["printed_by"].startswith("0.5.17 only with triton")
    assert "intel_xpu" in f.fix  # the log ran on XPU
    assert result.facts["kv_tokens"] == 850333 and result.facts["mamba_cache_size"] == 94


def test_wave_backend_layer_probe_on_granite():
    f = diagnose_file("sglang-rocm-wave-granite.log").findings[0]
    assert (f.code, f.requested_layer, f.valid_layers) == ("LAYER_NOT_IN_FULL_ATTENTION", 0, (10, 13, 17, 27))
    assert "wave backend" in f.fix and "aiter" in f.fix
    assert "triton backend" not in f.fix


@pytest.mark.parametrize("log, code, detail", [
    ("sglang-0.5.23-xpu-page-size.log", "NO_BUFFER_PAGE_SIZE", None),
    ("sglang-lfm2-triton.log", "TRITON_FIRST_LAYER_NOT_ATTENTION", ("arch", "Lfm2ForCausalLM")),
    ("sglang-mamba-state-oom.log", "STATE_CACHE_NO_MEMORY", ("per", "46.81")),
    ("sglang-weights-no-kv.log", "WEIGHTS_LEAVE_NO_KV", ("need", "0.739")),
    ("sglang-pp-indexerror.log", "PP_VALUE_BUFFER_INDEX", None),
    ("sglang-missing-v-head-dim.log", "MISSING_GET_V_HEAD_DIM", ("cls", "MyOffloadKVPool")),
    ("sglang-track-interval.log", "TRACK_INTERVAL_PAGE", None),
])
def test_start_up_errors(log, code, detail):
    result = diagnose_file(log)
    assert codes(result) == [code]
    f = result.findings[0]
    assert f.severity == "error" and f.explanation and f.fix and f.engine == "sglang"
    if detail:
        assert f.details[detail[0]] == detail[1]


def test_no_buffer_page_size_explains_the_xpu_ordering_trap():
    result = diagnose_file("sglang-0.5.23-xpu-page-size.log")
    assert result.facts["sglang_version"] == "0.5.23" and result.facts["page_size"] == 128
    assert "--disable-radix-cache" in result.findings[0].fix


def test_healthy_start_gives_only_warnings():
    result = diagnose_file("sglang-0.5.23-xpu-healthy.log")
    assert codes(result) == ["PAGE_SIZE_CHANGED"]
    assert result.ok
    snap = result.findings[0]
    assert snap.severity == "warning" and snap.details["old"] == "1" and snap.details["new"] == "128"
    assert result.facts["max_total_num_tokens"] == 648832 and result.facts["disable_radix_cache"] is True


def test_concurrency_cap_by_mamba_state():
    f = diagnose_file("sglang-0.5.23-cuda-state-capped.log").findings[0]
    assert f.code == "MAX_RUNNING_CAPPED_BY_STATE" and f.severity == "warning"
    assert (f.details["running"], f.details["slots"], f.details["ratio"]) == ("15", "75", "5")


def test_a_bare_assert_without_its_context_is_only_unrecognised():
    from bringup.core.diagnosis import diagnose

    log = "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    assert ok\nAssertionError\n"
    assert codes(diagnose(log)) == ["UNRECOGNIZED_ERROR"]


def test_every_pattern_has_a_plain_explanation_and_fix():
    from bringup.core.diagnosis import PATTERNS

    for p in PATTERNS:
        assert p.severity in ("error", "warning", "info"), p.code
        assert p.title and len(p.explanation) > 30 and len(p.fix) > 15, p.code
        if p.kind == "layer":
            assert "layer" in p.compiled.groupindex and "valid" in p.compiled.groupindex, p.code


def test_causal_conv1d_on_xpu_names_the_releases_that_bind_it():
    from bringup.core.diagnosis import diagnose

    f = diagnose("NameError: name 'causal_conv1d_fn_triton' is not defined\n").findings[0]
    assert f.code == "CAUSAL_CONV1D_MISSING" and "Upgrade to sglang 0.5.17 and later" in f.fix
    assert f.details["printed_by"] == "a build before 0.5.17 (every profiled release binds it on XPU)"


@pytest.mark.parametrize("line, code, releases", [
    ("ValueError: --sampling-backend intel_xpu requires --device xpu, got --device cuda", "SAMPLING_BACKEND_XPU",
     "0.5.21 and later"),
    ("ValueError: --linear-attn-backend intel_xpu requires Intel XPU", "LINEAR_ATTN_INTEL_XPU", "0.5.19 and later"),
    ("TypeError: causal_conv1d_update_xpu() got an unexpected keyword argument 'intermediate_conv_window'",
     "CONV1D_UPDATE_XPU_KWARG", "0.5.17 or 0.5.18"),
    ("ValueError: activation = relu2 is not supported", "RELU2_MOE_UNSUPPORTED", "no release from 0.5.17 to 0.5.23"),
    ("Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio.",
     "MAMBA_PING_PONG_EXHAUSTED", "0.5.17 and later"),
])
def test_every_sglang_text_is_labelled_from_the_wheels(line, code, releases):
    """Patterns with a `source_text` are labelled from the profiles' `messages` (the maintainer script
    looks each text up in every wheel)."""
    from bringup.core.diagnosis import diagnose

    found = [f for f in diagnose(line + "\n").findings if f.code == code]
    assert found, codes(diagnose(line + "\n"))
    assert found[0].details["printed_by"].startswith(releases)
