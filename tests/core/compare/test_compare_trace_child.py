"""The layer A/B's trace child on its own: it steps the request itself whatever the engine's defaults
on an accelerator (overlapped steps, the start-up warm-up: both on by default on CUDA, asked for
here through their env vars on the CPU), refuses a trace that missed steps instead of calling it a
match, says which stage it is in, and a child that stalls is named by its stage and its stack (by its
stage alone, killed plainly, where there is no SIGUSR1 or process group: Windows)."""

from __future__ import annotations

import os

import pytest
from server_helpers import tiny_checkpoint

from bringup.core.compare.layer_ab import Setting, _run, _trace_args, run_layer_ab, stalled
from bringup.core.compare.trace import trace
from bringup.core.errors import UserError

PROMPT = list(range(3, 20))
STEPS = 2


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("trace_child_models"))


@pytest.fixture
def accelerator_defaults(monkeypatch):
    """CUDA's defaults on the CPU: steps overlapped (runner.launch, not runner.run) and a warm-up."""
    monkeypatch.setenv("BRINGUP_OVERLAP", "1")
    monkeypatch.setenv("BRINGUP_WARMUP", "1")
    monkeypatch.setenv("BRINGUP_KERNELS", "reference")


def test_the_trace_runs_every_step_itself_under_an_accelerators_defaults(checkpoint, accelerator_defaults):
    logs, stages = [], []
    result = trace(str(checkpoint), device="cpu", dtype="float32", prompt_ids=PROMPT, steps=STEPS,
                   log=logs.append, progress=stages.append)
    assert [s["kind"] for s in result["steps"]] == ["prefill"] + ["decode"] * STEPS
    assert all(t is not None for t in result["sampled"]) and all(s["blocks"] for s in result["steps"])
    # each step keeps the logprob of the token it goes on with (the layer A/B's answer view)
    assert [s["logprobs"]["token"] for s in result["steps"]] == result["sampled"]
    assert all(s["logprobs"]["logprob"] <= 0 and len(s["logprobs"]["top"]) == 5 for s in result["steps"])
    assert not any(line.startswith("Warm-up") for line in logs), logs  # no warm-up before the one request
    assert stages[:2] == ["building the engine on cpu (float32, kernels reference)", "engine ready"]
    assert stages[2:] == [x for i in range(STEPS + 1) for x in
                          (f"step {i} ({'prefill' if i == 0 else 'decode'}, {len(PROMPT) if i == 0 else 1} tokens) "
                           "running", f"step {i} done")]


def test_a_trace_that_missed_the_engines_steps_is_refused_not_a_match(checkpoint, accelerator_defaults, monkeypatch):
    """An engine whose steps bypass runner.run (here: overlapped steps turned back on after the
    helper built it) leaves the trace empty; that is an error, never 'matches over 0 steps'."""
    from bringup.core.numerics import capture

    built = capture.eager_engine

    def overlapped(*args, **kwargs):
        engine = built(*args, **kwargs)
        engine.overlap = True
        return engine

    monkeypatch.setattr(capture, "eager_engine", overlapped)
    with pytest.raises(UserError, match=r"saw 0 of the 3 sampling steps"):
        trace(str(checkpoint), device="cpu", dtype="float32", prompt_ids=PROMPT, steps=STEPS, log=lambda m: None)


def test_the_parent_shows_each_sides_stages_as_they_come(checkpoint, accelerator_defaults):
    shown = []
    result = run_layer_ab(str(checkpoint), Setting(kernels="reference"), Setting(kernels="reference"),
                          prompt_ids=PROMPT, steps=STEPS, progress=shown.append)
    assert result.divergence.first is None and len(result.divergence.steps) == STEPS + 1
    for side in "AB":
        mine = [line for line in shown if line.startswith(f"{side}: ")]
        assert mine[0].startswith(f"{side}: reading the prompt ids") and f"{side}: step {STEPS} done" in " ".join(mine)
        assert mine[-1].startswith(f"{side}: saving ")
    first_b = next(i for i, x in enumerate(shown) if x.startswith("B: "))
    assert all(x.startswith("A: ") for x in shown[:first_b])  # B follows A's saved trace: it starts after


def test_a_stalled_child_is_named_by_its_stage_and_stack(checkpoint, tmp_path):
    """A child that blocks (its prompt file a pipe nobody writes) is asked for its stack, ended, and
    the message says where it sat: the stage it last named and the line its main thread was in."""
    fifo = tmp_path / "prompt.json"
    os.mkfifo(fifo)
    out = tmp_path / "b.pt"
    args = _trace_args(str(checkpoint), Setting(), fifo, STEPS, out, None, False)
    with pytest.raises(UserError) as err:
        _run("B", args, {}, out, timeout=8)
    message = str(err.value)
    assert message.startswith("run B did not finish in 8 s")
    assert f"it was at: reading the prompt ids from {fifo}" in message
    assert "its stack (most recent call first):" in message and "read_text" in message
    assert not out.exists()


def test_stalled_reads_the_last_stage_and_the_main_threads_innermost_frames():
    stderr = "\n".join([
        "trace: importing torch (0.0 s)", "KV Cache is allocated.", "trace: step 0 (prefill, 32 tokens) running (2.0 s)",
        "Thread 0x00007f (most recent call first):", '  File "/x/threading.py", line 320 in wait',
        "", "Current thread 0x00007e (most recent call first):", '  File "/x/jit.py", line 9 in compile',
        '  File "/x/trace.py", line 80 in run', "", "Thread 0x00007d (most recent call first):",
        '  File "/x/other.py", line 1 in idle'])
    text = stalled(stderr)
    assert text.splitlines()[0] == "it was at: step 0 (prefill, 32 tokens) running (2.0 s)"
    assert text.splitlines()[2:] == ['  File "/x/jit.py", line 9 in compile', '  File "/x/trace.py", line 80 in run']
    assert stalled("Load weight begin") == "it wrote no stage (stuck before importing torch?)"
    assert "compiling Triton kernels" not in text


def test_a_child_past_its_time_inside_tritons_compiler_is_said_to_be_compiling():
    # the stack a fresh H200 gave (bench/ab_device.py, 2026-12-03): the first traced prefill still compiling
    stderr = "\n".join([
        "trace: step 0 (prefill, 32 tokens) running (the first step on a GPU compiles its kernels) (16.5 s)",
        "Current thread 0x00007e (most recent call first):",
        '  File "/venv/lib/python3.12/site-packages/triton/compiler/code_generator.py", line 1533 in visit',
        '  File "/usr/lib/python3.12/ast.py", line 407 in visit'])
    text = stalled(stderr)
    assert "compiling Triton kernels, not stuck" in text and "--timeout" in text


def test_a_prompt_file_that_is_not_json_is_a_clear_error(checkpoint, tmp_path):
    bad = tmp_path / "prompt.json"
    bad.write_text("5, 6, 7")
    out = tmp_path / "a.pt"
    with pytest.raises(UserError, match=r"run A: --prompt-ids .*not a JSON list of token ids"):
        _run("A", _trace_args(str(checkpoint), Setting(), bad, STEPS, out, None, False), {}, out, timeout=60)


@pytest.fixture
def without_sigusr1(monkeypatch):
    """Windows: no SIGUSR1 (nothing to ask a running child for its stack with) and no os.killpg."""
    import signal

    monkeypatch.delattr(signal, "SIGUSR1")
    monkeypatch.delattr(os, "killpg")


def test_without_sigusr1_a_stalled_child_is_killed_and_named_by_its_stage(checkpoint, tmp_path, without_sigusr1,
                                                                        monkeypatch):
    import subprocess

    import psutil

    started = []

    class Watched(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self.pid)

    monkeypatch.setattr(subprocess, "Popen", Watched)
    fifo = tmp_path / "prompt.json"
    os.mkfifo(fifo)
    out = tmp_path / "b.pt"
    with pytest.raises(UserError) as err:
        _run("B", _trace_args(str(checkpoint), Setting(), fifo, STEPS, out, None, False), {}, out, timeout=8)
    message = str(err.value)
    assert message.startswith("run B did not finish in 8 s")
    assert f"it was at: reading the prompt ids from {fifo}" in message
    assert "its stack" not in message and "BRINGUP_TRACE_STACKS=S" in message
    assert len(started) == 1 and not psutil.pid_exists(started[0])  # ended by the plain kill, and reaped


def test_the_trace_child_starts_without_sigusr1(tmp_path, without_sigusr1, capsys):
    from bringup.core.compare.trace import main

    bad = tmp_path / "prompt.json"
    bad.write_text("not json")
    assert main(["unused", "--prompt-ids", str(bad), "--out", str(tmp_path / "a.pt")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trace: reading the prompt ids from {bad}") and "not a JSON list of token ids" in err
