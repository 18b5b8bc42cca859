"""The CPU's compiled decode step built beside an engine that decodes eagerly meanwhile
(core/engine/background_decode_step.py, decode_step_build.py): the switch comes between two steps
and keeps the greedy tokens, a later start loads the saved step without a child, a failed build
leaves eager steps, and no build process outlives the engine or the server."""

from __future__ import annotations

import os
import signal
import sys
import time

import psutil
import pytest
import torch

from bringup.core.engine import saved_decode_step
from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams
from engine_helpers import tiny_nemotron_h

BUILD_TIMEOUT_S = 900  # a bound for a hung build, not a speed: the tiny model's takes well under a minute


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    if not saved_decode_step.available():
        pytest.skip("this torch saves no compiled decode steps")
    return tiny_nemotron_h(tmp_path_factory.mktemp("background") / "tiny")


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One inductor cache for the tests that build (the first) and load (the second) the same step."""
    return tmp_path_factory.mktemp("inductor")


@pytest.fixture(autouse=True)
def keep_threads():
    """The engines here set torch's thread count; later tests get it back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _engine(folder, cache, monkeypatch, log, background=True, threads=2):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))  # the server's and the child's
    return Engine(EngineConfig(str(folder), device="cpu", max_running_requests=4, cpu_threads=threads,
                               cpu_compile=background, cpu_compile_background=background), log=log)


def _workload(engine):
    vocab = int(engine.vocab_size or len(engine.tokenizer))
    prompts = [[(7 * i + 3 * j) % vocab for j in range(n)] for i, n in enumerate((5, 19, 12, 3, 30, 9))]
    params = [SamplingParams(max_new_tokens=n, temperature=0.0, ignore_eos=True) for n in (9, 4, 14, 6, 11, 2)]
    return prompts, params


def _run_switching(engine, prompts, params, steps_before: int):
    """Run the workload: `steps_before` steps, then wait for the compiled step (the switch comes
    between two steps, with requests mid-way), then the rest. Each request's tokens, and whether
    each step after the wait ran compiled."""
    ids = [engine.add_request(p, sp, detokenize=False) for p, sp in zip(prompts, params)]
    got = {rid: [] for rid in ids}
    compiled_steps = []

    def step():
        for out in engine.step():
            got[out.request_id] += out.token_ids

    for _ in range(steps_before):
        step()
        assert engine.runner.compiled_decode is None and not engine.runner.last_step_graphed
    assert engine.has_unfinished()  # the switch comes mid-way
    assert engine.background_decode.wait(BUILD_TIMEOUT_S), engine.background_decode.info()
    while engine.has_unfinished():
        step()
        compiled_steps.append(engine.runner.last_step_graphed)
    return [got[rid] for rid in ids], compiled_steps


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while not _gone(pid) and time.monotonic() < end:
        time.sleep(0.1)
    return _gone(pid)


def test_a_child_builds_the_step_and_the_engine_switches_between_steps_with_the_same_tokens(
        tiny_folder, shared_cache, monkeypatch):
    lines = []
    engine = _engine(tiny_folder, shared_cache, monkeypatch, lines.append)
    build = engine.background_decode
    assert build.state == "building" and build.pid is not None and not _gone(build.pid)
    assert any(f"decoding eagerly while the compiled step builds (pid {build.pid})" in line for line in lines), lines
    assert engine.decode_step_words() == f"decoding eagerly while the compiled step builds (pid {build.pid})"
    info = engine.server_info()
    assert info["cpu_decode_step"] == "eager" and info["cpu_decode_build"]["state"] == "building"
    assert torch.get_num_threads() == 1  # one core left to the build until the switch

    prompts, params = _workload(engine)
    traced = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    got, compiled_steps = _run_switching(engine, prompts, params, steps_before=4)
    assert any("CPU: compiled decode step in use after" in line and f"built in pid {build.pid}" in line
               and "loaded in" in line for line in lines), lines
    assert engine.server_info()["cpu_decode_step"] == "compiled"
    assert engine.decode_step_words().startswith("compiled decode step in use after")
    assert torch.get_num_threads() == 2
    assert any(compiled_steps), compiled_steps  # decode steps after the switch ran the built step ...
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == traced  # ... loaded, never traced here
    assert _gone(build.pid) and len(list((shared_cache / "bringup_decode_steps").glob("*.bin"))) == 1

    eager = _engine(tiny_folder, shared_cache, monkeypatch, lambda m: None, background=False)
    assert got == eager.generate(prompts, params)
    engine.close()


def test_a_later_start_loads_the_saved_step_without_a_child(tiny_folder, shared_cache, monkeypatch):
    if not list((shared_cache / "bringup_decode_steps").glob("*.bin")):
        pytest.skip("needs the step the test before built")
    lines = []
    engine = _engine(tiny_folder, shared_cache, monkeypatch, lines.append)
    assert engine.background_decode.state == "loading" and engine.background_decode.pid is None
    assert any("decoding eagerly while the saved compiled step loads" in line for line in lines), lines
    prompts, params = _workload(engine)
    got, compiled_steps = _run_switching(engine, prompts, params, steps_before=0)  # (a load may beat a step)
    assert any(compiled_steps) and engine.server_info()["cpu_decode_step"] == "compiled"
    assert got == _engine(tiny_folder, shared_cache, monkeypatch, lambda m: None, background=False).generate(
        prompts, params)


def test_a_failed_build_leaves_eager_steps_and_says_why(tiny_folder, tmp_path, monkeypatch):
    # The server's key no longer matches what the child loads: the child refuses to build a step
    # the server could not load (a real failure of the build, reported through its result file).
    monkeypatch.setattr(saved_decode_step, "step_key", lambda *args: "0" * 32)
    lines = []
    engine = _engine(tiny_folder, tmp_path / "inductor", monkeypatch, lines.append)
    build = engine.background_decode
    prompts, params = _workload(engine)
    assert not build.wait(BUILD_TIMEOUT_S)
    assert build.state == "failed" and "differ from the server's" in build.error
    assert any("could not be built (the build's model and pools differ from the server's" in line
               and "decode steps stay eager" in line for line in lines), lines
    assert torch.get_num_threads() == 2 and engine.runner.compiled_decode is None
    assert engine.server_info()["cpu_decode_step"] == "eager" and _gone(build.pid)
    assert [len(t) for t in engine.generate(prompts[:2], params[:2])] == [9, 4]


def test_closing_the_engine_ends_the_build_and_its_compilers(tiny_folder, tmp_path, monkeypatch):
    engine = _engine(tiny_folder, tmp_path / "inductor", monkeypatch, lambda m: None)
    build = engine.background_decode
    child = psutil.Process(build.pid)
    assert os.getpgid(build.pid) == build.pid  # its own group: the compilers it starts are in it
    engine.close()
    assert _gone(child.pid) and build.state == "failed" and "stopped" in build.error
    assert not [p.pid for p in psutil.process_iter() if not _gone(p.pid) and _group(p.pid) == child.pid]


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


@pytest.mark.slow
def test_the_server_says_what_decodes_and_leaves_no_build_behind_when_stopped_or_killed(tiny_folder, tmp_path):
    import httpx
    from server_helpers import Server, wait_ready

    from bringup.core.client.engine_process import EngineProcess

    import tempfile
    from pathlib import Path

    def folders():
        return set(Path(tempfile.gettempdir()).glob("bringup-decode-build-*"))

    before = folders()
    for how in (signal.SIGTERM, signal.SIGKILL):
        env = {**os.environ, "BRINGUP_CPU_COMPILE": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / how.name)}
        proc = EngineProcess([sys.executable, "-m", "bringup", "serve", str(tiny_folder), "--port", "0",
                              "--cpu-threads", "2"], env=env)
        proc.start()
        server = wait_ready(Server(proc, "", tiny_folder))
        try:
            info = httpx.get(server.base_url + "/server_info", timeout=30).json()
            assert info["cpu_decode_step"] == "eager" and info["cpu_decode_build"]["state"] == "building"
            pid = info["cpu_decode_build"]["pid"]
            ready = next(line for line in proc.lines if "Ready in" in line)
            assert ready.endswith(f"; decoding eagerly while the compiled step builds (pid {pid})"), ready
            assert not _gone(pid)
            os.kill(proc.pid, how)  # the server alone: the build must end by the server's doing
            proc.proc.wait(60)
            assert _wait_gone(pid), f"the build process {pid} outlived the server ({how.name})"
            assert not [f for f in folders() - before if f.exists()]  # nor its working folder
        finally:
            proc.stop()
