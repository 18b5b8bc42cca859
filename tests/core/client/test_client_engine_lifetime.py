"""An engine never outlives its window: the window killed outright (SIGKILL) takes its engine with
it, and an engine left running anyway is found at the next start and ended on request. (The
lifeline pipe alone ending `bringup serve` is proved in test_run_attach.py, on its shared engine.)"""

import json
import os
import signal
import time

import pytest

from bringup.core.client import engine_records as records
from lifetime_helpers import (LEAVE_BEHIND, PIPE_ONLY_WINDOW, WINDOW_WITH_ENGINE, gone, read_until, spawn_python,
                              wait_gone)


@pytest.mark.timeout(240)
def test_sigkilled_window_takes_its_real_engine_with_it():
    window = spawn_python(WINDOW_WITH_ENGINE)
    try:
        line = read_until(window, "READY", timeout=180)
        engine_pid = int(line.split()[1])
        assert not gone(engine_pid)
        assert (records.engines_dir() / f"{engine_pid}.json").is_file()  # the record a later start would read
        t0 = time.monotonic()
        os.kill(window.pid, signal.SIGKILL)
        window.wait(10)
        assert wait_gone(engine_pid, timeout=20), "the engine outlived its SIGKILLed window"
        print(f"engine gone {time.monotonic() - t0:.2f} s after its window was SIGKILLed")
    finally:
        if window.poll() is None:
            window.kill()
            window.wait()
        if "engine_pid" in locals() and not gone(engine_pid):  # the test failed: leave nothing behind
            os.killpg(engine_pid, signal.SIGKILL)
    assert records.leftover_engines() == []  # nothing to offer: the engine went with its window
    assert not (records.engines_dir() / f"{engine_pid}.json").exists()  # and its stale record was swept


@pytest.mark.timeout(120)
def test_the_lifeline_alone_ends_the_engine_when_its_window_is_killed():
    """Where there is no parent-death signal, the pipe does it, even though the engine's log pipe
    (read by the dead window) breaks at the same moment."""
    window = spawn_python(PIPE_ONLY_WINDOW)
    engine_pid = None
    try:
        engine_pid = int(read_until(window, "ENGINE", timeout=90).split()[1])
        os.kill(window.pid, signal.SIGKILL)
        window.wait(10)
        assert wait_gone(engine_pid, timeout=20), "the engine outlived its window with only the lifeline"
    finally:
        if window.poll() is None:
            window.kill()
            window.wait()
        if engine_pid is not None and not gone(engine_pid):
            os.killpg(engine_pid, signal.SIGKILL)


def test_an_engine_left_behind_is_found_and_ended_on_request(qtbot):
    from bringup.app.leftover_bar import LeftoverEnginesBar

    window = spawn_python(LEAVE_BEHIND)
    engine_pid = int(read_until(window, "ENGINE", timeout=30).split()[1])
    window.wait(10)
    try:
        assert not gone(engine_pid)  # it ignored SIGTERM and the lifeline: a real leftover
        bar = LeftoverEnginesBar()
        qtbot.addWidget(bar)
        found = bar.check()
        assert [r.pid for r in found] == [engine_pid] and found[0].port == 39999
        assert bar.isVisibleTo(bar.parentWidget() or bar) or not bar.isHidden()
        assert f"pid {engine_pid}" in bar.label.text() and "39999" in bar.label.text()
        assert bar.end_all() == 1
        assert gone(engine_pid) and bar.isHidden()
        assert records.leftover_engines() == []
    finally:
        if not gone(engine_pid):
            os.kill(engine_pid, signal.SIGKILL)


def test_records_of_ended_engines_are_swept_and_keys_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("BRINGUP_ENGINES_DIR", str(tmp_path))
    child = spawn_python("import time; time.sleep(30)")
    try:
        path = records.record_engine(child.pid, "http://127.0.0.1:1234",
                                  ["bringup", "serve", "--api-key", "sk-secret", "--x=1", "--api-key=sk-two"])
        assert path.stat().st_mode & 0o777 == 0o600  # owner-only: another user can neither read nor plant
        assert [p.name for p in tmp_path.iterdir()] == [path.name]  # written in one step: no temp file left
        text = path.read_text()
        assert "sk-secret" not in text and "sk-two" not in text
        assert json.loads(text)["argv"] == ["bringup", "serve", "--api-key", "***", "--x=1", "--api-key=***"]
        assert records.leftover_engines() == []  # its window (this process) is alive: not a leftover
        (tmp_path / "junk.json").write_text("{half")
    finally:
        child.kill()
        child.wait()
    assert records.leftover_engines() == []
    assert list(tmp_path.iterdir()) == []  # the ended engine's record and the broken file are gone


def test_an_engine_started_as_a_script_is_proved_through_its_interpreter(tmp_path, monkeypatch):
    """`vllm serve` (a console script) shows as `python /path/vllm serve` once its shebang ran."""
    import subprocess
    import sys

    monkeypatch.setenv("BRINGUP_ENGINES_DIR", str(tmp_path / "engines"))
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    script.chmod(0o755)
    proc = subprocess.Popen([str(script), "serve", "model"], start_new_session=True)
    try:
        wait_for = time.monotonic() + 10
        while len(records.psutil.Process(proc.pid).cmdline()) != 4 and time.monotonic() < wait_for:
            time.sleep(0.05)  # until exec has replaced the fork's command line
        rec = records.EngineRecord(proc.pid, records.psutil.Process(proc.pid).create_time(), "http://127.0.0.1:1",
                                   [str(script), "serve", "model"], 1, 0.0, True)
        assert records.disproof(rec) is None
        assert "not the engine it names" in records.disproof(
            records.EngineRecord(rec.pid, rec.created, rec.url, [str(script), "serve", "other"], 1, 0.0, True))
    finally:
        proc.kill()
        proc.wait()
