"""`bringup plan`: text, JSON, exit codes, human sizes, weights from safetensors headers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from bringup.cli import main
from bringup.core.errors import UserError
from bringup.core.planner import parse_size
from bringup.core.planner.weights import checkpoint_weights
from plan_helpers import NANO, tiny_nemotron_config

from repo_paths import DATA


def run(capsys, *argv):
    code = main(["plan", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_document_for_sglang(capsys):
    code, out, _ = run(capsys, NANO, "--device-memory", "80GiB", "--target", "sglang==0.5.23", "--json")
    plan = json.loads(out)
    assert code == 0 and plan["ok"]
    for key in ("weights_bytes", "kv_bytes_per_token", "state_bytes_per_request", "kv_tokens", "state_slots",
                "max_running_requests", "bottleneck", "all_attention", "breakdown", "page_size", "mem_fraction"):
        assert key in plan
    assert plan["kv_bytes_per_token"] == 6144 and plan["state_bytes_per_request"] == 49_082_368
    assert plan["device"] == "cuda" and plan["device_memory"] == 80 * 2**30
    assert [s["name"] for s in plan["breakdown"]] == ["weights", "kv_pool", "state_pool", "reserve", "free"]


def test_text_output_and_options(capsys):
    code, out, _ = run(capsys, NANO, "--device-memory", "141G", "--target", "sglang==0.5.23", "--device", "xpu",
                       "--tp", "2", "--ssm-dtype", "bf16", "--context", "8192", "--disable-radix-cache")
    assert code == 0
    assert "SSM bfloat16" in out and "TP 2" in out
    assert "KV per token      3,072 B" in out
    assert "1 per running request (disabled)" in out


def test_the_embedded_plan_shows_both_step_budgets_and_takes_the_mixed_one(capsys):
    code, out, _ = run(capsys, NANO, "--device-memory", "h200", "--device", "cuda")
    assert code == 0 and "prompt per step   4,096 tokens, 2,048 beside decoding requests" in out
    code, out, _ = run(capsys, NANO, "--device-memory", "h200", "--device", "cuda", "--mixed-prefill-size", "1024")
    assert code == 0 and "prompt per step   4,096 tokens, 1,024 beside decoding requests" in out
    code, _, err = run(capsys, NANO, "--device-memory", "h200", "--device", "cuda", "--target", "sglang==0.5.23",
                       "--mixed-prefill-size", "1024")
    assert code == 2 and "--mixed-prefill-size is the embedded engine's" in err


def test_sglang_defaults_assumed_and_flags_that_override_them(capsys):
    code, out, _ = run(capsys, NANO, "--device-memory", "141G", "--target", "sglang==0.5.18", "--device", "xpu")
    assert code == 0
    assert "assumed: chunked_prefill_size = 8192 (sglang 0.5.18 default for devices below 160 GB; " \
           "python/sglang/srt/server_args.py:4830 (sglang 0.5.18))" in out
    assert "assumed: cuda_graph_max_bs = 256 " in out and "assumed: mem_fraction_static = " in out
    code, out, _ = run(capsys, NANO, "--device-memory", "141G", "--target", "sglang==0.5.18", "--device", "xpu",
                       "--chunked-prefill-size", "4096", "--cuda-graph-max-bs", "32", "--free-memory", "130G", "--json")
    plan = json.loads(out)
    assert set(plan["assumed"]) == {"mem_fraction_static"}
    assert "512 + 1.5 x 4096" in plan["assumed"]["mem_fraction_static"]
    assert "no decode graphs on XPU by default" in plan["assumed"]["mem_fraction_static"]  # opt-in there
    code, out, _ = run(capsys, NANO, "--device-memory", "141G", "--target", "sglang==0.5.18", "--device", "cuda",
                       "--cuda-graph-max-bs", "32", "--json")
    assert "decode graphs 32 x 2 MB" in json.loads(out)["assumed"]["mem_fraction_static"]
    assert any("free before the weights load" in n for n in plan["notes"])
    code, _, err = run(capsys, NANO, "--device-memory", "80G", "--target", "sglang==0.5.23", "--free-memory", "90G")
    assert code == 2 and "at most the device memory" in err


def test_does_not_fit_exits_1(capsys):
    code, out, _ = run(capsys, NANO, "--device-memory", "64GiB", "--target", "sglang==0.5.23")
    assert code == 1 and "DOES NOT FIT: Loaded weights leave no GPU memory" in out


@pytest.mark.parametrize("argv, words", [
    (["--device-memory", "12XB"], "cannot read the size"),
    (["--target", "tgi==1.0", "--device-memory", "80G"], "unknown target"),
    (["--target", "vllm==0.33.0", "--device-memory", "80G", "--mamba-strategy", "no_buffer"], "mamba_cache_mode"),
    (["--device-memory", "80G", "--mamba-strategy", "no_buffer"], "sglang==X.Y.Z only"),
    (["--device-memory", "80G", "--tp", "2"], "one device"),
    (["--device-memory", "80G", "--kv-dtype", "int3"], "unknown KV cache dtype"),
])
def test_bad_input_exits_2_with_a_message(capsys, argv, words):
    code, _, err = run(capsys, NANO, *argv)
    assert code == 2 and words in err


def test_missing_model_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, tmp_path / "nowhere" / "config.json", "--device-memory", "8G")
    assert code == 2 and err


@pytest.mark.parametrize("text, value", [("80GiB", 80 * 2**30), ("141G", 141 * 10**9), ("512MiB", 512 * 2**20),
                                          ("1.5e9", 1_500_000_000), ("4096", 4096), ("2 TiB", 2 * 2**40)])
def test_human_sizes(text, value):
    assert parse_size(text) == value


def test_sizes_refused():
    for text in ("", "-1G", "lots", "0"):
        with pytest.raises(UserError):
            parse_size(text)


def _checkpoint(folder, sharded: bool):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(tiny_nemotron_config()))
    a = {"model.embed.weight": np.zeros((256, 32), np.float32), "model.idx": np.zeros((10,), np.int64)}
    b = {"lm_head.weight": np.zeros((256, 32), np.float16)}
    if sharded:
        save_file(a, str(folder / "model-00001-of-00002.safetensors"))
        save_file(b, str(folder / "model-00002-of-00002.safetensors"))
        weight_map = {k: "model-00001-of-00002.safetensors" for k in a} | {k: "model-00002-of-00002.safetensors" for k in b}
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    else:
        save_file(a | b, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("sharded", [False, True])
def test_weights_from_safetensors_headers(tmp_path, sharded):
    folder = _checkpoint(tmp_path / "ckpt", sharded)
    ckpt = checkpoint_weights(folder)
    assert ckpt.params == 2 * 256 * 32 + 10
    assert ckpt.stored_bytes == 256 * 32 * 4 + 10 * 8 + 256 * 32 * 2
    assert ckpt.bytes_as(2) == 2 * 256 * 32 * 2 + 10 * 8  # floats cast to bf16, the int64 tensor kept
    assert len(ckpt.files) == (2 if sharded else 1)


def test_plan_reads_a_local_checkpoint(capsys, tmp_path):
    folder = _checkpoint(tmp_path / "ckpt", sharded=True)
    code, out, _ = run(capsys, folder, "--device-memory", "1GiB", "--dtype", "bfloat16", "--json")
    plan = json.loads(out)
    assert code == 0 and plan["weights_source"] == "checkpoint"
    assert plan["weights_bytes"] == 2 * 256 * 32 * 2 + 10 * 8


def test_damaged_checkpoint_is_a_user_error(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"\x05\x00")
    with pytest.raises(UserError, match="too short"):
        checkpoint_weights(folder)
    (folder / "model.safetensors").write_bytes((10**12).to_bytes(8, "little") + b"{}")
    with pytest.raises(UserError, match="damaged"):
        checkpoint_weights(folder)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "gone.safetensors"}}))
    with pytest.raises(UserError, match="missing"):
        checkpoint_weights(folder)


def test_auto_device_memory_on_cpu(capsys):
    code, out, _ = run(capsys, NANO, "--device", "cpu", "--json")
    plan = json.loads(out)
    assert plan["device"] == "cpu" and plan["device_memory"] > 0
    assert "psutil" in plan["notes"][0]


def test_a_partial_download_falls_back_to_the_parameter_count(capsys, tmp_path):
    folder = _checkpoint(tmp_path / "ckpt", sharded=True)
    (folder / "model-00002-of-00002.safetensors").unlink()
    code, out, _ = run(capsys, folder / "config.json", "--device-memory", "1GiB", "--json")
    plan = json.loads(out)
    assert code == 0 and plan["weights_source"] == "params"
    assert any("missing" in note for note in plan["notes"])


def test_compare_with_a_real_start_up_log(capsys):
    """bringup plan --compare-log: the budget from the log's free memory and weights, planned vs logged."""
    from pathlib import Path

    logs = DATA / "sglang_startup"
    code, out, _ = run(capsys, NANO, "--target", "sglang==0.5.23", "--device", "xpu", "--device-memory", "24GiB",
                       "--tp", "4", "--mem-fraction", "0.85", "--page-size", "64", "--disable-radix-cache",
                       "--max-running-requests", "8", "--context", "8192", "--chunked-prefill-size", "1024",
                       "--cuda-graph-max-bs", "8", "--compare-log", logs / "nemotron-3-nano-tp4-arc-b60.log")
    assert code == 0 and "planned vs the start-up log" in out
    assert "1,557,504  (-0.4%)" in out and "mamba slots                       8 vs            8" in out
    code, out, _ = run(capsys, logs / "LiquidAI__LFM2-700M.json", "--target", "sglang==0.5.17", "--device", "cuda",
                       "--device-memory", "16GiB", "--compare-log", logs / "lfm2-700m-16gb.log", "--json")
    rows = {r["figure"]: r for r in json.loads(out)["log_comparison"]}
    assert rows["KV tokens"]["logged"] == 473_854 and abs(rows["KV tokens"]["difference"]) < 0.03
    assert rows["mamba slots"]["logged"] == 85_292 and abs(rows["mamba slots"]["difference"]) < 0.03
    code, _, err = run(capsys, NANO, "--device-memory", "80G", "--compare-log", logs / "lfm2-700m-16gb.log")
    assert code == 2 and "--target sglang==X.Y.Z" in err
    code, _, err = run(capsys, NANO, "--device-memory", "80G", "--target", "sglang==0.5.23", "--compare-log",
                       logs / "LiquidAI__LFM2-700M.json")
    assert code == 2 and "no 'KV Cache is allocated'" in err
