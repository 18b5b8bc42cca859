"""A reader that goes away (`bringup inspect X --json | head`) ends the command quietly, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

from layermap_helpers import REPO


def test_closed_stdout_gives_no_traceback():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "bringup", "inspect", "NVIDIA-Nemotron-3-Nano-30B-A3B", "--json"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=60,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 141


def test_a_model_given_without_a_command_gets_the_commands_that_take_it(capsys):
    from bringup.cli import main

    assert main(["NVIDIA-Nemotron-3-Nano-30B-A3B"]) == 2
    err = capsys.readouterr().err
    assert "unknown command" in err and "bringup gui NVIDIA-Nemotron-3-Nano-30B-A3B" in err
