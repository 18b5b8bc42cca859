"""With --model, the pools an SGLang log allocated are checked against the planner's prediction.

The logs carry figures computed by hand from SGLang's formulas (sglang-notes §2.5) for their launch:
e.g. the TP 2 log: rest = 7.98 - 22.81 x (1 - 0.852) GB; 0.9/1.9 of it in slots of 23.4 MiB -> 94
slots; the rest / 3,072 B -> 850,333 KV tokens.
"""

from __future__ import annotations

from bringup.core.diagnosis import diagnose
from diagnose_helpers import diagnose_file, read
from plan_helpers import nano_map

GB = 1024**3


def _check(result):
    return [f for f in result.findings if f.code.startswith("POOLS_")]


def test_tp2_log_matches_the_plan():
    [f] = _check(diagnose_file("sglang-0.5.17-xpu-triton-layer0.log", nano_map()))
    assert f.code == "POOLS_MATCH_PLAN" and f.severity == "info"
    assert f.details["KV tokens"] == {"log": 850333, "plan": 850333}
    assert f.details["state slots"] == {"log": 94, "plan": 94}
    assert f.lines == (8, 9)  # the KV Cache and Mamba Cache lines


def test_by_hand_tp2_figures():
    rest = (7.98 - 22.81 * (1 - 0.852)) * GB
    per = 23 * ((4096 + 2 * 8 * 128) // 2 * 3 * 2 + 32 * 64 * 128 * 4)  # TP 2 halves conv and SSM
    slots = int((rest * 0.9 / 1.9 - per) // per)
    assert slots == 94
    assert int((rest - (slots + 1) * per) // 3072) == 850333


def test_page_snapped_xpu_log_and_extra_buffer_log_match():
    for log in ("sglang-0.5.23-xpu-healthy.log", "sglang-0.5.23-cuda-state-capped.log"):
        [f] = _check(diagnose_file(log, nano_map()))
        assert f.code == "POOLS_MATCH_PLAN", (log, f.explanation)


def test_a_different_allocation_is_a_warning():
    text = read("sglang-0.5.17-xpu-triton-layer0.log").replace("max_mamba_cache_size: 94", "max_mamba_cache_size: 47")
    result = diagnose(text, nano_map())
    [f] = _check(result)
    assert f.code == "POOLS_DIFFER_FROM_PLAN" and f.severity == "warning"
    assert f.details["state slots"] == {"log": 47, "plan": 94}
    assert "--mamba-ssm-dtype" in f.fix


def test_no_check_without_a_model_or_the_figures():
    assert _check(diagnose_file("sglang-0.5.17-xpu-triton-layer0.log")) == []
    assert _check(diagnose_file("sglang-mamba-state-oom.log", nano_map())) == []  # no "Load weight begin"


def test_our_engine_log_is_not_checked_against_sglang_formulas():
    text = ("Load weight begin. avail mem=11.80 GB\nLoad weight end. elapsed=1.00 s, avail mem=11.00 GB\n"
            "Planner: mem fraction 0.300 chosen for cpu\n"
            "server_args=ServerArgs(mem_fraction_static=0.3)\n"
            "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 65536, K size: 0.19 GB, V size: 0.19 GB\n")
    assert _check(diagnose(text, nano_map())) == []
