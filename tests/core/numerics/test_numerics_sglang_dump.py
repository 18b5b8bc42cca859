"""`bringup compare SOURCE --sglang-dump DIR`: an SGLang-layout per-layer dump (written from a real
bfloat16 run of our engine, keys and files as SGLang's tensor dump hook writes them) against the
float32 reference, block by block; a fault injected at block 3 is named there."""

from __future__ import annotations

import json

import pytest
import torch

from bringup.cli import main
from bringup.core.errors import UserError
from bringup.core.numerics.capture import capture
from bringup.core.numerics.sglang_dump import read_pass

from engine_helpers import tiny_nemotron_h
from sglang_dump_helpers import PassSpec, write_sglang_dump

PROMPTS = ("An SGLang server on the device read this prompt first.", "A second request, batched with the first one.", "And a third one, later.")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """A tiny NemotronH (blocks M * E M - * E), and dumps of its bfloat16 runs: clean and with a fault at block 3."""
    root = tmp_path_factory.mktemp("sglang-dump")
    ckpt = tiny_nemotron_h(root / "tiny")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ckpt)
    a, b, c = ([int(t) for t in tok.encode(p)] for p in PROMPTS)
    quiet = lambda _m: None  # noqa: E731
    first = capture(str(ckpt), device="cpu", dtype="bfloat16", sequences=[a, b], log=quiet)
    later = capture(str(ckpt), device="cpu", dtype="bfloat16", sequences=[c], log=quiet)
    faulty = capture(str(ckpt), device="cpu", dtype="bfloat16", sequences=[a], perturb_layer=3, log=quiet)
    clean_dir, faulty_dir, some_dir = root / "clean", root / "faulty", root / "some-layers"
    # Pass 0: two prompts batched; pass 1: both again, their first 5 tokens from the prefix cache; pass 2: a third.
    write_sglang_dump(clean_dir, [PassSpec(first, [a, b]), PassSpec(first, [a, b], cached=5), PassSpec(later, [c])],
                      ckpt)
    write_sglang_dump(faulty_dir, [PassSpec(faulty, [a])], ckpt)
    write_sglang_dump(some_dir, [PassSpec(first, [a, b], layers=(3, 4))], ckpt)  # --debug-tensor-dump-layers 3 4
    return {"ckpt": ckpt, "clean": clean_dir, "faulty": faulty_dir, "some": some_dir, "first": first,
            "sequences": [a, b], "third": c}


def _compare(capsys, *argv) -> tuple[int, dict]:
    code = main(["compare", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_blocks_are_read_from_the_pre_norms_residuals(dumps):
    dump = read_pass(dumps["clean"], 7)
    assert dump.index == 0 and dump.sequences == dumps["sequences"] and dump.dtype == "bfloat16"
    assert sorted(dump.blocks) == list(range(7)) and sorted(dump.routing) == [2, 6]
    for i in range(7):  # block N = layers.{N+1}.norm's residual (the last: norm_f's) = the run's block output
        assert torch.equal(dump.blocks[i], dumps["first"]["blocks"][i].to(torch.bfloat16).float())
    assert torch.equal(dump.routing[6], dumps["first"]["routing"][6])
    assert read_pass(dumps["clean"], 7, 2).sequences == [dumps["third"]]
    some = read_pass(dumps["some"], 7)  # only layers 3 and 4 hooked: blocks 2 and 3, and the last from norm_f
    assert sorted(some.blocks) == [2, 3, 6]


def test_a_top_level_module_renamed_by_the_environment_is_followed(dumps, tmp_path):
    # TENSOR_DUMP_TOP_LEVEL_MODULE_NAME=backbone: every key starts with "backbone." instead of "model."
    [rank] = [p for p in dumps["clean"].iterdir()]
    tensors = torch.load(rank / "Pass00000.pt")
    renamed = tmp_path / rank.name
    renamed.mkdir()
    torch.save({"backbone" + k[len("model"):]: v for k, v in tensors.items()}, renamed / "Pass00000.pt")
    dump = read_pass(tmp_path, 7)
    assert sorted(dump.blocks) == list(range(7)) and sorted(dump.routing) == [2, 6]
    assert dump.sequences == dumps["sequences"]


def test_a_clean_batched_dump_has_no_divergent_block_and_reports_routing_flips_apart(dumps, capsys, no_orphans):
    code, doc = _compare(capsys, str(dumps["ckpt"]), "--sglang-dump", str(dumps["clean"]))
    assert code == 0, doc
    assert doc["first_divergent_layer"] is None and doc["dtype"] == "bfloat16"
    assert doc["device"] == "SGLang dump pass 0" and doc["source_file"].endswith("/Pass00000.pt")
    assert all(l["rel_err"] is not None and 0 < l["rel_err"] <= doc["tolerance"] for l in doc["layers"])
    assert doc["routing"]["reference_follows_device"] is True
    assert [l["routing_flips"] is not None for l in doc["layers"]] == [l["ffn"] == "moe" for l in doc["layers"]]
    assert all(f["code"] == "MOE_ROUTING_FLIPS" and f["severity"] == "info" for f in doc["findings"])
    assert doc["num_tokens"] == sum(len(s) for s in dumps["sequences"])  # both requests, each read on its own


def test_a_fault_at_block_3_is_named_first(dumps, capsys, no_orphans):
    code, doc = _compare(capsys, str(dumps["ckpt"]), "--sglang-dump", str(dumps["faulty"]))
    assert code == 1
    assert doc["first_divergent_layer"] == 3
    assert all(l["rel_err"] <= doc["tolerance"] for l in doc["layers"][:3])
    assert doc["findings"][0]["code"] == "BLOCK_DIVERGES" and doc["findings"][0]["layers"] == [3]
    assert "block 3 (mamba2) first exceeds 5e-02" in doc["findings"][0]["message"]


def test_passes_that_cannot_be_compared_say_why(dumps, tmp_path, capsys):
    assert main(["compare", str(dumps["ckpt"]), "--sglang-dump", str(dumps["clean"]), "--pass", "1"]) == 2
    assert "Pass00001 is not a full prefill" in capsys.readouterr().err
    assert main(["compare", str(dumps["ckpt"]), "--sglang-dump", str(dumps["clean"]), "--pass", "9"]) == 2
    assert "--pass 9: the dump has passes 0..2" in capsys.readouterr().err
    with pytest.raises(UserError, match="holds no SGLang dump"):
        read_pass(tmp_path, 7)
    broken = tmp_path / "TP0_PP0_Rank0_pid1"
    broken.mkdir()
    with pytest.raises(UserError, match="holds no Pass"):
        read_pass(tmp_path, 7)
    (broken / "Pass00000.pt").write_bytes(b"cut short")
    with pytest.raises(UserError, match="cannot be read as a tensor dump"):
        read_pass(tmp_path, 7)
    assert main(["compare", str(dumps["ckpt"]), "--sglang-dump", str(dumps["clean"]), "--perturb-layer", "3"]) == 2
    assert "--perturb-layer does not go with --sglang-dump" in capsys.readouterr().err
