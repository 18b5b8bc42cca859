"""SGLang rules per release, with the releases' own messages, on the real configs."""

from __future__ import annotations

import pytest
from rules_helpers import (LFM2, LFM2_ATTENTION, NANO, NANO_ATTENTION, QWEN3_NEXT, QWEN3_NEXT_ATTENTION, codes,
                           finding, layer_map, run)

LAYER0_NANO = "ValueError: layer_id=0 not in full attention layers: dict_keys([5, 12, 19, 26, 33, 42])"


def test_nano_on_xpu_under_0517_fails_twice_as_pr_32227_reports():
    r = run(NANO, "sglang==0.5.17", device="xpu")
    assert not r.ok
    assert codes(r, "error") == ["EXTRA_BUFFER_PLATFORM", "TRITON_LAYER0_PROBE"]
    gate = finding(r, "EXTRA_BUFFER_PLATFORM")
    assert gate.engine_message == "AssertionError: extra_buffer needs CUDA/MUSA/NPU/ROCm (FLA)."
    assert "auto picked extra_buffer" in gate.message
    crash = finding(r, "TRITON_LAYER0_PROBE")
    assert crash.engine_message == LAYER0_NANO
    assert crash.requested_layer == 0 and list(crash.valid_layers) == NANO_ATTENTION
    assert crash.layers[0] == 0 and "mamba2" in crash.message
    assert r.resolved.attention_backend == "triton" and r.resolved.mamba_strategy == "extra_buffer"
    assert r.first_error.code == "EXTRA_BUFFER_PLATFORM"


def test_disabling_radix_cache_under_0517_still_meets_the_layer0_probe():
    r = run(NANO, "sglang==0.5.17", device="xpu", disable_radix_cache=True)
    assert codes(r, "error") == ["TRITON_LAYER0_PROBE"]
    assert r.resolved.mamba_strategy is None and r.resolved.state_slots_per_request == 1


def test_the_xpu_recipe_passes_on_every_release():
    for target in ("sglang==0.5.17", "sglang==0.5.18", "sglang==0.5.19", "sglang==0.5.20", "sglang==0.5.21",
                   "sglang==0.5.22", "sglang==0.5.23"):
        r = run(NANO, target, device="xpu", attention_backend="intel_xpu", disable_radix_cache=True)
        assert r.ok, (target, codes(r))
        assert r.resolved.page_size == 128


def test_0517_fix_names_the_releases_that_run_extra_buffer_on_xpu():
    r = run(NANO, "sglang==0.5.17", device="xpu")  # triton by default on XPU, as in PR #32227
    gate = finding(r, "EXTRA_BUFFER_PLATFORM")
    assert "only sglang 0.5.18 or 0.5.19 run extra_buffer on XPU" in gate.fix
    assert gate.source.startswith("python/sglang/srt/server_args.py:5592 (sglang 0.5.17)")
    probe = finding(r, "TRITON_LAYER0_PROBE")
    assert "upgrade to sglang 0.5.18 and later" in probe.fix
    assert probe.source.startswith("python/sglang/srt/layers/attention/triton_backend.py:208 (sglang 0.5.17)")


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_pr_32227_ships_in_0518_triton_on_xpu_passes(version):
    """PR #32227's launch (triton, the XPU default) starts from 0.5.18 (issue 18)."""
    r = run(NANO, f"sglang=={version}", device="xpu")
    assert r.ok and not codes(r, "error") and not codes(r, "warning"), codes(r)
    assert r.resolved.attention_backend == "triton"
    assert (r.resolved.mamba_strategy, r.resolved.overlap_schedule, r.resolved.state_slots_per_request) == \
        ("extra_buffer", True, 5)


@pytest.mark.parametrize("version, refused", [("0.5.17", True), ("0.5.18", True), ("0.5.19", False), ("0.5.23", False)])
def test_an_explicit_triton_backend_for_nemotron_h_is_refused_until_0519(version, refused):
    """The 0.5.17 and 0.5.18 wheels assert attention_backend != "triton" for NemotronH in the model
    adjustments (server_args.py 5503 / 5722), before the default backend is filled in: only an explicit
    --attention-backend triton meets it. 0.5.19 dropped the assert."""
    r = run(NANO, f"sglang=={version}", device="xpu", attention_backend="triton")
    if not refused:
        assert r.ok and "TRITON_REFUSED_FOR_MODEL" not in codes(r)
        return
    f = finding(r, "TRITON_REFUSED_FOR_MODEL")
    assert r.first_error is f and f.stage == "arguments"
    assert f.engine_message == ("AssertionError: NemotronHForCausalLM does not support triton attention backend,as the "
                                "first layer might not be an attention layer")  # sic: no space after the comma
    assert "drop --attention-backend" in f.fix and "0.5.19 and later" in f.fix
    assert f.source.startswith("python/sglang/srt/server_args.py:")


@pytest.mark.parametrize("version", ["0.5.20", "0.5.21", "0.5.22", "0.5.23"])
def test_from_0520_xpu_refuses_explicit_extra_buffer_and_auto_is_no_buffer(version):
    r = run(NANO, f"sglang=={version}", device="xpu", attention_backend="triton", mamba_strategy="extra_buffer")
    f = finding(r, "EXTRA_BUFFER_UNSUPPORTED")
    assert not r.ok and f.severity == "error" and r.first_error.code == "EXTRA_BUFFER_UNSUPPORTED"
    assert f.engine_message == "AssertionError: extra_buffer is not supported for NemotronHForCausalLM; use no_buffer."
    assert "no_buffer --disable-overlap-schedule" in f.fix and "0.5.20 and later" in f.fix
    assert f.source.startswith("python/sglang/srt/arg_groups/overrides.py:")
    auto = run(NANO, f"sglang=={version}", device="xpu", attention_backend="triton")
    assert auto.ok
    assert (auto.resolved.mamba_strategy, auto.resolved.overlap_schedule, auto.resolved.state_slots_per_request) == \
        ("no_buffer", False, 3)


@pytest.mark.parametrize("version, text", [
    ("0.5.19", "Intel XPU attention backend for MLA Decode only supports page_sizes of [16, 32, 64, 128], "
               "changing page_size from 1 to 128."),
    ("0.5.20", "Intel XPU attention backend for MLA only supports page_sizes of [64, 128, 16, 32], "
               "changing page_size from 1 to 128."),
])
def test_intel_xpu_mla_page_message_per_release(version, text):
    r = run("moonshotai__Kimi-Linear-48B-A3B-Instruct.json", f"sglang=={version}", device="xpu",
            attention_backend="intel_xpu", disable_radix_cache=True, page_size=1)
    snap = finding(r, "PAGE_SIZE_SNAPPED")
    assert snap.engine_message == text and f"(sglang {version})" in snap.source


def test_0519_fixes_both_crashes_on_xpu():
    r = run(NANO, "sglang==0.5.19", device="xpu")
    assert r.ok and not codes(r, "error") and not codes(r, "warning")
    assert r.resolved.mamba_strategy == "extra_buffer" and r.resolved.overlap_schedule
    assert r.resolved.state_slots_per_request == 5


def test_0519_gate_wording_names_xpu_and_still_refuses_cpu():
    r = run(NANO, "sglang==0.5.19", device="cpu")
    assert finding(r, "EXTRA_BUFFER_PLATFORM").engine_message == \
        "AssertionError: extra_buffer needs CUDA/MUSA/NPU/ROCm/XPU (FLA)."
    assert r.resolved.attention_backend == "intel_amx"


def test_0521_refuses_extra_buffer_on_xpu_with_its_wording():
    r = run(NANO, "sglang==0.5.21", device="xpu", mamba_strategy="extra_buffer")
    f = finding(r, "EXTRA_BUFFER_UNSUPPORTED")
    assert f.severity == "error"
    assert f.engine_message == "AssertionError: extra_buffer is not supported for NemotronHForCausalLM; use no_buffer."
    assert "refuses extra_buffer on XPU" in f.message


def test_0521_auto_on_xpu_resolves_to_no_buffer_without_overlap():
    r = run(NANO, "sglang==0.5.21", device="xpu")
    assert r.ok
    assert (r.resolved.mamba_strategy, r.resolved.overlap_schedule, r.resolved.state_slots_per_request) == ("no_buffer", False, 3)
    assert "refuses extra_buffer on XPU" in r.resolved.why["mamba_strategy"]


def test_0523_platform_gate_wording_on_cpu():
    r = run(NANO, "sglang==0.5.23", device="cpu")
    assert finding(r, "EXTRA_BUFFER_PLATFORM").engine_message == \
        "AssertionError: extra_buffer requires platform support for Mamba cache state snapshots."


def test_intel_xpu_page_snap_and_the_ordering_trap():
    r = run(NANO, "sglang==0.5.23", device="xpu", attention_backend="intel_xpu")
    snap = finding(r, "PAGE_SIZE_SNAPPED")
    assert snap.engine_message == ("Intel XPU attention backend only supports page_sizes of [64, 128], "
                                   "changing page_size from None to 128.")
    assert r.resolved.page_size == 128 and r.resolved.mamba_strategy == "no_buffer"
    assert finding(r, "NO_BUFFER_PAGE_AFTER_SNAP").severity == "warning"
    assert r.ok and r.verdict == "warning"


def test_explicit_page_64_with_radix_on_xpu_fails_no_buffer():
    r = run(NANO, "sglang==0.5.23", device="xpu", attention_backend="intel_xpu", page_size=64)
    assert finding(r, "NO_BUFFER_PAGE_SIZE").engine_message == "AssertionError: no_buffer only supports page_size=1."
    assert r.resolved.page_size == 64  # 64 is an intel_xpu size: no snap
    assert "PAGE_SIZE_SNAPPED" not in codes(r)


def test_intel_xpu_without_xmx_falls_back_to_triton():
    r = run(NANO, "sglang==0.5.17", device="xpu", attention_backend="intel_xpu", disable_radix_cache=True, xmx=False)
    assert finding(r, "INTEL_XPU_NO_XMX").engine_message == \
        "The current platform does not support Intel XMX, will fallback to triton backend."
    assert r.resolved.attention_backend == "triton"
    assert finding(r, "TRITON_LAYER0_PROBE").engine_message == LAYER0_NANO


def test_explicit_no_buffer_needs_overlap_off_and_page_1_and_not_trtllm():
    r = run(NANO, "sglang==0.5.23", device="cuda", mamba_strategy="no_buffer", attention_backend="trtllm_mha", page_size=64)
    assert [finding(r, c).engine_message for c in ("NO_BUFFER_PAGE_SIZE", "NO_BUFFER_OVERLAP", "NO_BUFFER_TRTLLM")] == [
        "AssertionError: no_buffer only supports page_size=1.",
        "AssertionError: no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True.",
        "AssertionError: no_buffer do not support trtllm_mha attention backend.",
    ]
    ok = run(NANO, "sglang==0.5.23", device="cuda", mamba_strategy="no_buffer", disable_overlap_schedule=True)
    assert ok.ok and ok.resolved.state_slots_per_request == 3


def test_lazy_needs_overlap_and_holds_four_slots():
    r = run(NANO, "sglang==0.5.23", device="cuda", mamba_strategy="extra_buffer_lazy", disable_overlap_schedule=True)
    assert finding(r, "LAZY_NEEDS_OVERLAP").engine_message == (
        "AssertionError: Lazy extra buffer requires overlap schedule (--disable-overlap-schedule is incompatible)")
    ok = run(NANO, "sglang==0.5.23", device="cuda", mamba_strategy="extra_buffer_lazy")
    assert ok.ok and ok.resolved.state_slots_per_request == 4


def test_extra_buffer_page_must_line_up_with_the_model_chunk():
    assert layer_map(NANO).config["chunk_size"] == 128
    r = run(NANO, "sglang==0.5.23", device="cuda", page_size=48)
    assert r.resolved.mamba_strategy == "extra_buffer"
    assert finding(r, "EXTRA_BUFFER_CHUNK_PAGE").engine_message == (
        "AssertionError: For SSM models, either chunk_size or page_size must be divisible by the other, "
        "got chunk_size=128, page_size=48")
    assert finding(r, "EXTRA_BUFFER_TRACK_INTERVAL").engine_message == "AssertionError"  # 256 % 48, no message
    assert run(NANO, "sglang==0.5.23", device="cuda", page_size=64).ok


def test_strategy_is_meaningless_with_radix_disabled():
    r = run(NANO, "sglang==0.5.23", device="cuda", mamba_strategy="extra_buffer", disable_radix_cache=True)
    assert r.ok and "MAMBA_STRATEGY_IGNORED" in codes(r, "info")
    # PR #19169's ValueError is in none of the released wheels: 0.5.17 also skips the checks (issue 18).
    old = run(NANO, "sglang==0.5.17", device="cuda", mamba_strategy="extra_buffer", disable_radix_cache=True)
    assert old.ok and not codes(old, "warning") and "MAMBA_STRATEGY_IGNORED" in codes(old, "info")


def test_extra_buffer_on_a_model_without_mamba_state():
    new = run("meta-llama__Meta-Llama-3.1-8B.json", "sglang==0.5.23", device="cuda", mamba_strategy="extra_buffer")
    assert finding(new, "MAMBA_STRATEGY_WITHOUT_MAMBA").engine_message == \
        "ValueError: --mamba-radix-cache-strategy extra_buffer needs mamba state, got LlamaForCausalLM."
    assert not new.ok
    assert run("meta-llama__Meta-Llama-3.1-8B.json", "sglang==0.5.21", device="cuda", mamba_strategy="extra_buffer").ok is False
    old = run("meta-llama__Meta-Llama-3.1-8B.json", "sglang==0.5.20", device="cuda", mamba_strategy="extra_buffer")
    warned = finding(old, "MAMBA_STRATEGY_WITHOUT_MAMBA")
    assert old.ok and warned.severity == "warning" and "sglang 0.5.21 and later does" in warned.message


def test_lfm2_refuses_triton_with_its_message():
    r = run(LFM2, "sglang==0.5.23", device="cuda", attention_backend="triton")
    f = finding(r, "TRITON_REFUSED_FOR_MODEL")
    assert f.engine_message == ("AssertionError: Lfm2ForCausalLM does not support triton attention backend, as the "
                                "first layer might not be an attention layer")
    assert f.layers == (0,) and f.stage == "arguments"


def test_lfm2_on_xpu_default_triton_warns_and_crashes_at_layer0_before_the_fix():
    new = run(LFM2, "sglang==0.5.23", device="xpu")
    assert new.ok and "TRITON_DEFAULT_FOR_MODEL" in codes(new, "warning")
    assert new.resolved.mamba_strategy == "no_buffer"  # LFM2 is not an extra_buffer architecture
    old = run(LFM2, "sglang==0.5.17", device="xpu")
    assert finding(old, "TRITON_LAYER0_PROBE").engine_message == \
        f"ValueError: layer_id=0 not in full attention layers: dict_keys({LFM2_ATTENTION})"
    assert "short_conv" in finding(old, "TRITON_LAYER0_PROBE").message
    assert run(LFM2, "sglang==0.5.23", device="xpu", attention_backend="intel_xpu", disable_radix_cache=True).verdict == "ok"


def test_gdn_models_were_already_safe_with_triton_before_the_fix():
    # triton_backend asked the pool for get_v_head_dim() for hybrid_gdn_config before #32227 widened it.
    r = run(QWEN3_NEXT, "sglang==0.5.17", device="xpu", disable_radix_cache=True)
    assert r.resolved.attention_backend == "triton" and r.ok


def test_wave_still_probes_layer0_in_0523():
    r = run(QWEN3_NEXT, "sglang==0.5.23", device="rocm", attention_backend="wave")
    assert finding(r, "WAVE_LAYER0_PROBE").engine_message == \
        f"ValueError: layer_id=0 not in full attention layers: dict_keys({QWEN3_NEXT_ATTENTION})"
    assert run(QWEN3_NEXT, "sglang==0.5.23", device="rocm").resolved.attention_backend == "aiter"


def test_falcon_h1_layer0_is_attention_so_no_probe_crash():
    r = run("tiiuae__Falcon-H1-0.5B.json", "sglang==0.5.17", device="cuda", attention_backend="triton")
    assert "TRITON_LAYER0_PROBE" not in codes(r) and r.ok


@pytest.mark.parametrize("name", ["ai21labs__AI21-Jamba-1.5-Mini.json"])
def test_jamba_is_not_implemented(name):
    assert "ARCH_NOT_IMPLEMENTED" in codes(run(name, "sglang==0.5.23", device="cuda"), "error")


def test_defaults_per_device_and_gpu():
    assert run(NANO, "sglang==0.5.23", device="cuda").resolved.attention_backend == "fa3"
    assert run(NANO, "sglang==0.5.23", device="cuda", gpu="blackwell").resolved.attention_backend == "trtllm_mha"
    assert run(NANO, "sglang==0.5.23", device="cuda", gpu="other").resolved.attention_backend == "flashinfer"
    assert run(NANO, "sglang==0.5.23", device="mps", disable_radix_cache=True).resolved.attention_backend == "torch_native"
    r = run(NANO, "sglang==0.5.23", device="xpu")
    assert finding(r, "ATTENTION_BACKEND_DEFAULT").engine_message == \
        "Attention backend not specified. Use triton backend by default."


def test_backend_not_known_on_device_is_a_warning_not_an_invented_error():
    r = run(NANO, "sglang==0.5.23", device="cuda", attention_backend="intel_xpu", disable_radix_cache=True)
    assert finding(r, "ATTENTION_BACKEND_DEVICE").severity == "warning" and r.ok


def test_ssm_dtype_resolution_and_xpu_gdn_fp16_warning():
    assert run(NANO, "sglang==0.5.23", device="cuda").resolved.mamba_ssm_dtype == "float32"
    r = run(QWEN3_NEXT, "sglang==0.5.23", device="xpu", mamba_ssm_dtype="float16")
    assert "intel/llm-scaler#559" in finding(r, "XPU_GDN_FP16_STATE").source
    assert run("meta-llama__Meta-Llama-3.1-8B.json", "sglang==0.5.23", device="cuda").resolved.mamba_ssm_dtype is None


def test_linear_attn_backend_intel_xpu_is_a_choice_from_0519():
    old = run(QWEN3_NEXT, "sglang==0.5.18", device="xpu", linear_attn_backend="intel_xpu")
    f = finding(old, "LINEAR_BACKEND_UNKNOWN")
    assert old.first_error is f and "use sglang 0.5.19 and later" in f.fix
    assert f.engine_message.startswith("error: argument --linear-attn-backend: invalid choice: 'intel_xpu' (choose from 'triton'")
    assert f.source.startswith("python/sglang/srt/server_args.py:375 (sglang 0.5.18)")
    assert "LINEAR_BACKEND_UNKNOWN" not in codes(run(QWEN3_NEXT, "sglang==0.5.19", device="xpu", linear_attn_backend="intel_xpu"))


@pytest.mark.parametrize("version, backend, message", [
    ("0.5.17", "fa3", "Got attention_backend=fa3."),
    ("0.5.20", "flashinfer", "Got prefill=flashinfer, decode=flashinfer."),
    ("0.5.21", "flashinfer", None),  # SM100 accepts flashinfer for hybrid GDN from 0.5.21
])
def test_gdn_on_blackwell_backends_per_release(version, backend, message):
    r = run(QWEN3_NEXT, f"sglang=={version}", device="cuda", gpu="blackwell", attention_backend=backend)
    if message is None:
        assert "GDN_BLACKWELL_BACKEND" not in codes(r)
        return
    f = finding(r, "GDN_BLACKWELL_BACKEND")
    assert f.engine_message.startswith("AssertionError: Only {") and f.engine_message.endswith(message)
    assert f.source.startswith("python/sglang/srt/layers/attention/attention_registry.py:")
    if backend == "flashinfer":
        assert "sglang 0.5.21 and later (which accept flashinfer)" in f.fix


@pytest.mark.parametrize("version, backend", [("0.5.17", "flashinfer"), ("0.5.18", "flashinfer"),
                                              ("0.5.19", "trtllm_mha"), ("0.5.23", "trtllm_mha")])
def test_nemotron_h_default_on_blackwell_per_release(version, backend):
    # _nemotron_h_overrides: flashinfer on SM100 in 0.5.17-0.5.18, trtllm_mha from 0.5.19 (found by tools/oracle)
    r = run(NANO, f"sglang=={version}", device="cuda", gpu="blackwell", disable_radix_cache=True)
    assert r.resolved.attention_backend == backend
    assert r.resolved.page_size == (64 if backend == "trtllm_mha" else 1)


@pytest.mark.parametrize("version", ["0.5.17", "0.5.20", "0.5.23"])
def test_gpt_oss_picks_its_own_backend_on_xpu_and_other_gpus(version):
    # _gpt_oss_overrides: intel_xpu on XPU (page snapped to 128), triton on CUDA GPUs other than SM90/SM100
    xpu = run("openai__gpt-oss-20b.json", f"sglang=={version}", device="xpu", xmx=True)
    assert (xpu.resolved.attention_backend, xpu.resolved.page_size) == ("intel_xpu", 128)
    assert run("openai__gpt-oss-20b.json", f"sglang=={version}", device="xpu", xmx=True,
               page_size=64).resolved.page_size == 64
    assert run("openai__gpt-oss-20b.json", f"sglang=={version}", device="cuda",
               gpu="other").resolved.attention_backend == "triton"
    assert run("openai__gpt-oss-20b.json", f"sglang=={version}", device="cuda",
               gpu="hopper").resolved.attention_backend == "fa3"


@pytest.mark.parametrize("version", ["0.5.17", "0.5.19", "0.5.23"])
def test_mla_on_rocm_takes_aiter_only_with_16_or_128_kv_heads_per_gpu(version):
    # get_default_attn_backend's MLA branch on HIP: Kimi-Linear has 32 KV heads (16 per GPU at TP 2)
    kimi = "moonshotai__Kimi-Linear-48B-A3B-Instruct.json"
    got = {tp: run(kimi, f"sglang=={version}", device="rocm", tp=tp, disable_radix_cache=True).resolved.attention_backend
           for tp in (1, 2, 4)}
    assert got == {1: "triton", 2: "aiter", 4: "triton"}
    r = run(kimi, f"sglang=={version}", device="rocm", disable_radix_cache=True)
    assert finding(r, "ATTENTION_BACKEND_DEFAULT").engine_message == \
        "Attention backend not specified. Use triton backend by default."
    assert run(NANO, f"sglang=={version}", device="rocm").resolved.attention_backend == "aiter"


@pytest.mark.parametrize("version", ["0.5.17", "0.5.18", "0.5.20", "0.5.23"])
def test_qwen3_next_on_blackwell_takes_trtllm_mha_when_page_1_is_not_required(version):
    # _qwen3_5_hybrid_overrides: trtllm_mha / page 64 with extra_buffer(_lazy) or no radix cache, else triton / page 1
    def got(**kw):
        r = run(QWEN3_NEXT, f"sglang=={version}", device="cuda", gpu="blackwell", **kw).resolved
        return r.attention_backend, r.page_size
    assert got(mamba_strategy="extra_buffer") == got(mamba_strategy="extra_buffer_lazy") == ("trtllm_mha", 64)
    assert got(disable_radix_cache=True) == ("trtllm_mha", 64)
    assert got() == got(mamba_strategy="no_buffer", disable_overlap_schedule=True) == ("triton", 1)


@pytest.mark.parametrize("version, refused", [("0.5.18", False), ("0.5.19", True), ("0.5.23", True)])
def test_no_buffer_meets_nemotron_h_own_trtllm_pick_on_blackwell(version, refused):
    # the model override's trtllm_mha is in place when validate_mamba_no_buffer runs (found by tools/oracle)
    r = run(NANO, f"sglang=={version}", device="cuda", gpu="blackwell", mamba_strategy="no_buffer",
            disable_overlap_schedule=True)
    assert ("NO_BUFFER_TRTLLM" in codes(r, "error")) == refused and r.ok != refused
    if refused:
        f = finding(r, "NO_BUFFER_TRTLLM")
        assert r.first_error is f and f.stage == "arguments" and "--attention-backend flashinfer" in f.fix
        assert f.engine_message == "AssertionError: no_buffer do not support trtllm_mha attention backend."
        assert [x.code for x in r.findings].count("NO_BUFFER_TRTLLM") == 1


@pytest.mark.parametrize("version", ["0.5.17", "0.5.21"])
def test_gpt_oss_on_xpu_refuses_a_dtype_other_than_bfloat16(version):
    f = finding(run("openai__gpt-oss-20b.json", f"sglang=={version}", device="xpu", xmx=True, dtype="float16"),
                "GPT_OSS_XPU_DTYPE")
    assert f.severity == "error" and f.engine_message.startswith(
        "NotImplementedError: GptOssForCausalLM on Intel XPU only supports bfloat16 dtype, but got 'float16'.")
    for ok in ({"dtype": "bfloat16"}, {}, {"device": "cuda", "dtype": "float16"}):
        kw = {"device": "xpu", "xmx": True, **ok}
        assert "GPT_OSS_XPU_DTYPE" not in codes(run("openai__gpt-oss-20b.json", f"sglang=={version}", **kw))
