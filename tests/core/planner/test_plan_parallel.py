"""`bringup plan --tp N` where the heads do not split: the plan says the launch would not start, in the rules' words."""

import json

from bringup.cli import main

NANO = "NVIDIA-Nemotron-3-Nano-30B-A3B"


def _plan(capsys, *argv) -> dict:
    code = main(["plan", NANO, "--device-memory", "141GiB", "--target", "sglang==0.5.17", "--json", *argv])
    assert code in (0, 1)
    return json.loads(capsys.readouterr().out)


def test_tp_that_does_not_divide_the_heads_is_named(capsys):
    notes = _plan(capsys, "--tp", "3")["notes"]
    blockers = [n for n in notes if n.startswith("this launch would not start")]
    assert any("32 attention heads do not split over 3 TP ranks" in n and "1, 2, 4, 8" in n for n in blockers)
    assert any("64 mamba" in n for n in blockers)


def test_tp_that_divides_adds_no_blocker(capsys):
    assert not [n for n in _plan(capsys, "--tp", "2")["notes"] if n.startswith("this launch would not start")]
