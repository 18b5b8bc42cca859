"""`bringup bench`: the workload, and one small real run of engine and transformers side by side."""

from __future__ import annotations

import json

import pytest

from bringup.core.bench.throughput import make_workload, parse_range
from bringup.core.errors import UserError
from server_helpers import tiny_checkpoint

pytestmark = pytest.mark.slow  # starts a real engine or server


def test_workload_is_reproducible_and_within_ranges():
    a = make_workload(20, (4, 9), (2, 5), seed=3, vocab_size=100)
    assert a == make_workload(20, (4, 9), (2, 5), seed=3, vocab_size=100)
    assert a != make_workload(20, (4, 9), (2, 5), seed=4, vocab_size=100)
    assert all(4 <= len(p) <= 9 and 2 <= n <= 5 for p, n in a)
    assert all(3 <= t < 100 for p, _ in a for t in p)  # no pad/bos/eos ids
    assert len({len(p) for p, _ in a}) > 1  # lengths really vary


@pytest.mark.parametrize("text", ["0:5", "9:3", "a:b", "1:2:3", ""])
def test_bad_ranges_are_user_errors(text):
    with pytest.raises(UserError, match="MIN:MAX"):
        parse_range(text, "--input-len")


def test_parse_range_accepts_one_number():
    assert parse_range("7", "--output-len") == (7, 7)
    assert parse_range("16:64", "--output-len") == (16, 64)


def test_bench_cli_json_runs_engine_and_transformers(tmp_path, capsys):
    from bringup.cli import main

    checkpoint = tiny_checkpoint(tmp_path)
    code = main(["bench", str(checkpoint), "--device", "cpu", "--num-seqs", "5", "--input-len", "4:12",
                 "--output-len", "3:6", "--seed", "1", "--max-running-requests", "2", "--repeats", "2", "--json"])
    assert code == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    # a long run is never silent: each phase and each baseline batch says so on stderr
    assert "engine: running 5 requests" in captured.err and "transformers: batch 3/3 done" in captured.err
    expected = sum(n for _, n in make_workload(5, (4, 12), (3, 6), 1, result_vocab(checkpoint)))
    assert result["output_tokens"] == expected
    assert result["batch_size"] == 2
    assert result["engine_tok_s"] > 0 and result["baseline_tok_s"] > 0
    assert result["ratio"] == pytest.approx(result["engine_tok_s"] / result["baseline_tok_s"], rel=1e-2)
    assert (result["num_seqs"], result["input_len"], result["output_len"], result["seed"]) == (5, [4, 12], [3, 6], 1)
    assert result["device"] == "cpu" and result["baseline"] == "transformers"
    # the weights the engine ran are named (a dense checkpoint: its dtype, nothing dequantised)
    assert result["weights"]["scheme"] and result["weights"]["dequantised_from"] == ""
    assert "weights " + result["weights"]["scheme"] in captured.err
    # On the CPU both sides run with the engine's thread count, and each side's CPU time and the load
    # average around it come with the wall-clock figures (the noise of a shared machine shows).
    assert result["threads"] >= 1 and "CPU thread(s) for both sides" in captured.err
    assert result["engine_cpu_seconds"] > 0 and result["baseline_cpu_seconds"] > 0
    base, eng = result["baseline_cpu_seconds"], result["engine_cpu_seconds"]  # each rounded to 1 ms
    assert (base - 5e-4) / (eng + 5e-4) - 1e-3 <= result["cpu_ratio"] <= (base + 5e-4) / (eng - 5e-4) + 1e-3
    assert set(result["load"]) == {"engine_start", "engine_end", "baseline_start", "baseline_end"}
    # Each side ran the workload twice and is credited with its fastest run; every run is kept.
    assert len(result["engine_runs"]) == len(result["baseline_runs"]) == 2 and result["repeats"] == 2
    assert result["engine_seconds"] == min(result["engine_runs"])
    assert result["baseline_seconds"] == min(result["baseline_runs"])
    # On the CPU the two sides' runs alternate (a busy neighbour slows both alike).
    order = [line.split(":")[0].strip() for line in captured.err.splitlines() if ": run " in line]
    assert order == ["engine", "transformers", "engine", "transformers"]


def test_bench_refuses_zero_repeats(capsys):
    from bringup.cli import main

    assert main(["bench", "default", "--device", "cpu", "--repeats", "0"]) == 2
    assert "--repeats 0 must be at least 1" in capsys.readouterr().err


def result_vocab(checkpoint) -> int:
    return json.loads((checkpoint / "config.json").read_text())["vocab_size"]
