"""A planted engine record never makes the window end a stranger: the leftover-engines bar offers to
end only a process that is the engine its record names, removes every other record with a note
that says why, and leaves the process running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from bringup.app.leftover_bar import LeftoverEnginesBar
from bringup.core.client import engine_records as records

DEAD_WINDOW = {"parent_pid": 2 ** 22 + 7, "parent_created": 1.0}  # a window that is gone


@pytest.fixture
def engines(tmp_path, monkeypatch):
    monkeypatch.setenv("BRINGUP_ENGINES_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def stranger():
    """Someone else's long-running program: a plain `sleep` in this test's own process group.

    Popen returns once the child has begun its exec, and Linux wakes the parent before the new
    program's command line is in place, so the test waits until the command reads as `sleep`."""
    proc = subprocess.Popen(["sleep", "120"])
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).cmdline() != ["sleep", "120"] and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def plant(folder, pid: int, argv: list[str], *, mode: int = 0o600, **fields) -> str:
    body = {"version": records.RECORD_VERSION, "pid": pid, "created": psutil.Process(pid).create_time(),
            "url": "http://127.0.0.1:39998", "argv": argv, "own_group": True, **DEAD_WINDOW, **fields}
    path = folder / f"{pid}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, mode)
    os.write(fd, json.dumps(body).encode())
    os.close(fd)
    os.chmod(path, mode)
    return path.name


def refused(qtbot, stranger, name: str, folder) -> str:
    bar = LeftoverEnginesBar()
    qtbot.addWidget(bar)
    assert bar.check() == []
    assert bar.end_button.isHidden()  # nothing is offered to end
    assert not bar.isHidden() and name in bar.label.text()  # but the removal is said
    assert stranger.poll() is None and psutil.Process(stranger.pid).status() != psutil.STATUS_ZOMBIE
    assert not (folder / name).exists()
    return bar.label.text()


def test_a_record_naming_an_engine_for_a_stranger_is_removed_and_the_stranger_lives(qtbot, engines, stranger):
    name = plant(engines, stranger.pid, [sys.executable, "-m", "bringup", "serve", "default", "--port", "39998"])
    text = refused(qtbot, stranger, name, engines)
    assert "runs `sleep 120`, not the engine it names" in text and "left alone" in text


def test_a_record_copying_the_strangers_own_command_is_not_an_engine(qtbot, engines, stranger):
    name = plant(engines, stranger.pid, ["sleep", "120"])  # pid, start time and command all match
    assert "`sleep 120` is not one the window starts engines with" in refused(qtbot, stranger, name, engines)


def test_a_record_others_could_write_is_not_believed(qtbot, engines, stranger):
    name = plant(engines, stranger.pid, ["sleep", "120"], mode=0o644)
    assert "others may write or read it (mode 644" in refused(qtbot, stranger, name, engines)


def test_a_record_from_another_start_time_is_a_reused_pid(qtbot, engines, stranger):
    name = plant(engines, stranger.pid, ["sleep", "120"], created=psutil.Process(stranger.pid).create_time() - 30)
    # the record's own start time is what says the engine it named is alive: a reused pid reads as ended
    bar = LeftoverEnginesBar()
    qtbot.addWidget(bar)
    assert bar.check() == [] and bar.isHidden()
    assert stranger.poll() is None and not (engines / name).exists()


def test_ending_proves_the_record_again_at_the_moment_of_the_answer(engines, stranger):
    """The user answers long after the offer: a record that stopped matching ends nothing."""
    rec = records.EngineRecord(stranger.pid, psutil.Process(stranger.pid).create_time(), "http://127.0.0.1:39998",
                               [sys.executable, "-m", "bringup", "serve"], DEAD_WINDOW["parent_pid"], 1.0, True)
    assert records.end_leftover(rec, timeout=1) is False
    assert stranger.poll() is None


STAND_IN_LISTENER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"status": "ok"}')
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""


def test_a_process_that_listens_but_does_not_answer_as_the_engine_is_refused(qtbot, engines, tmp_path_factory):
    """Command line and start time match, but the port's /health does not name the recorded pid."""
    stand_in = tmp_path_factory.mktemp("stand_in")
    (stand_in / "bringup").mkdir()
    (stand_in / "bringup" / "__init__.py").write_text("")
    (stand_in / "bringup" / "__main__.py").write_text(STAND_IN_LISTENER)
    argv = [sys.executable, "-m", "bringup", "serve"]
    proc = subprocess.Popen(argv, cwd=stand_in, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        name = plant(engines, proc.pid, argv, url=f"http://127.0.0.1:{port}")
        text = refused(qtbot, proc, name, engines)
        assert f"port {port} does not answer /health as the bringup engine with pid {proc.pid}" in text
    finally:
        proc.kill()
        proc.wait()


def test_a_process_showing_no_command_line_is_not_taken_for_the_engine(qtbot, engines, stranger, monkeypatch):
    # a process caught mid-exec (or a zombie) reads an empty command line: unproved, so left alone
    monkeypatch.setattr(psutil.Process, "cmdline", lambda self: [])
    name = plant(engines, stranger.pid, [sys.executable, "-m", "bringup", "serve", "default", "--port", "39998"])
    text = refused(qtbot, stranger, name, engines)
    assert "shows no command line" in text and "left alone" in text
