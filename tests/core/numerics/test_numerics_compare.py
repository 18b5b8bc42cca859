"""`bringup compare`: per-block errors against the float32 CPU reference; an injected fault is named first."""

from __future__ import annotations

import json

import pytest

from bringup.cli import main
from bringup.core.numerics.capture import perturb

from engine_helpers import tiny_nemotron_h


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_nemotron_h(tmp_path_factory.mktemp("compare") / "tiny")  # blocks M * E M - * E


def _compare(capsys, *argv) -> tuple[int, dict]:
    code = main(["compare", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_on_cpu_no_block_diverges_and_an_injected_fault_is_named_first(checkpoint, capsys, no_orphans):
    code, clean = _compare(capsys, str(checkpoint), "--device", "cpu")
    assert code == 0, clean
    assert clean["first_divergent_layer"] is None and clean["findings"] == []
    assert [(l["index"], l["mixer"], l["ffn"]) for l in clean["layers"]] == [
        (0, "mamba2", "none"), (1, "attention", "none"), (2, "none", "moe"), (3, "mamba2", "none"),
        (4, "none", "mlp"), (5, "attention", "none"), (6, "none", "moe")]
    assert all(l["rel_err"] <= clean["tolerance"] for l in clean["layers"])

    code, faulty = _compare(capsys, str(checkpoint), "--device", "cpu", "--perturb-layer", "3")
    assert code == 1
    assert faulty["first_divergent_layer"] == 3
    # The blocks before it agree to float32 rounding (the CPU's SDPA attention sums in another
    # order than transformers': 5e-8 seen; the references alone are bit for bit equal).
    assert all(l["rel_err"] < 1e-6 for l in faulty["layers"][:3])
    assert faulty["layers"][3]["rel_err"] == pytest.approx(0.1, rel=0.2)
    assert "block 3 (mamba2) first exceeds 1e-03" in faulty["findings"][0]["message"]


def test_a_block_that_is_not_there_is_a_clear_error(checkpoint, capsys):
    assert main(["compare", str(checkpoint), "--device", "cpu", "--perturb-layer", "7"]) == 2
    assert "--perturb-layer 7 is not a block of this model (it has blocks 0..6)" in capsys.readouterr().err


def test_perturbation_is_relative_to_the_block_and_repeatable():
    import torch

    hidden = torch.randn(5, 16) * 3
    a, b = perturb(hidden), perturb(hidden)
    assert torch.equal(a, b)
    rel = ((a - hidden).norm() / hidden.norm()).item()
    assert 0.05 < rel < 0.2


def test_dummy_weights_on_two_device_types_are_refused_before_any_run(capsys):
    # Seeded per device type: a CPU reference would hold other random weights than the GPU run.
    assert main(["compare", "default", "--device", "cuda", "--load-format", "dummy"]) == 2
    assert "seeds its random weights per device type" in capsys.readouterr().err
