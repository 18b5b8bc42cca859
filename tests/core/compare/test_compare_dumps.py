"""The layer-level A/B reads SGLang's per-layer tensor dumps as a run: one request's prefill pass and
its decode passes, laid out as SGLang's tensor dump hook writes them (tests/helpers/
sglang_dump_helpers.py, from the 0.5.17 / 0.5.23 format facts in core/numerics/sglang_dump.py),
with values from real bfloat16 runs of a tiny NemotronH. Our engine run on the dump's tokens and
experts agrees with a clean dump and finds an injected fault at block 3 in the prefill; two dumps
are compared over the steps where they read the same tokens; a folder that is no dump, vLLM's
included, says what to do."""

from __future__ import annotations

import pytest

from bringup.core.compare.dump_trace import dump_trace
from bringup.core.compare.layer_ab import Setting, common_steps, parse_setting, run_layer_ab
from bringup.core.errors import UserError
from bringup.core.numerics.capture import capture

from engine_helpers import tiny_nemotron_h
from sglang_dump_helpers import PassSpec, write_sglang_dump

PROMPT = list(range(3, 30))
STEPS = 2


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Dumps of one request, PROMPT then STEPS greedy tokens: pass 0 the prefill, pass k a decode pass
    (one token at position len-1). A decode pass's rows come from a full run of the sequence so far,
    its last token (the same arithmetic as a decode step)."""
    import torch

    from bringup.core.compare.trace import trace

    root = tmp_path_factory.mktemp("ab-dumps")
    ckpt = tiny_nemotron_h(root / "tiny")
    quiet = lambda _m: None  # noqa: E731
    mp = pytest.MonkeyPatch()
    mp.setenv("BRINGUP_KERNELS", "reference")
    try:
        tokens = trace(str(ckpt), device="cpu", dtype="bfloat16", prompt_ids=PROMPT, steps=STEPS, log=quiet)["sampled"]
        seqs = [PROMPT + tokens[:k] for k in range(STEPS + 1)]
        clean = [capture(str(ckpt), device="cpu", dtype="bfloat16", sequences=[s], log=quiet) for s in seqs]
        faulty = [capture(str(ckpt), device="cpu", dtype="bfloat16", sequences=[s], perturb_layer=3, log=quiet)
                  for s in seqs[:2]]
    finally:
        mp.undo()
    passes = lambda runs: [PassSpec(r, [s], cached=0 if k == 0 else len(s) - 1)  # noqa: E731
                           for k, (r, s) in enumerate(zip(runs, seqs))]
    write_sglang_dump(root / "clean", passes(clean), ckpt)
    write_sglang_dump(root / "faulty", passes(faulty), ckpt)
    other = passes(clean)
    other.append(PassSpec(clean[0], [seqs[0]]))  # then a new request: the first request's steps end before it
    write_sglang_dump(root / "then-another", other, ckpt)
    return {"ckpt": ckpt, "root": root, "tokens": tokens, "dtype": torch.bfloat16}


def test_a_dump_reads_as_one_requests_steps(dumps):
    t = dump_trace(dumps["root"] / "then-another", str(dumps["ckpt"]))
    assert [s["kind"] for s in t["steps"]] == ["prefill"] + ["decode"] * STEPS  # the new request is left out
    assert t["prompt_ids"] == PROMPT and t["sampled"][:STEPS] == dumps["tokens"][:STEPS] and t["sampled"][-1] is None
    assert t["dtype"] == "bfloat16" and not t["missing_blocks"] and t["routing"]  # MoE blocks' experts, from mixer.topk
    assert t["steps"][0]["blocks"][0].shape[0] == len(PROMPT)
    assert all(s["blocks"][0].shape[0] == 1 for s in t["steps"][1:])


def test_our_engine_on_a_clean_dumps_tokens_agrees_and_finds_a_fault_at_its_block(dumps):
    ours = parse_setting("kernels=reference,dtype=float32")
    clean = run_layer_ab(str(dumps["ckpt"]), parse_setting(f"dump={dumps['root'] / 'clean'}"), ours, steps=8)
    d = clean.divergence
    assert d.first is None and len(d.steps) == STEPS + 1 and d.errors and clean.prompt_ids == PROMPT
    assert max(d.errors.values()) < d.tolerance and not d.state_errors  # a dump holds no states
    faulty = run_layer_ab(str(dumps["ckpt"]), Setting(), parse_setting(f"dump={dumps['root'] / 'faulty'}"), steps=8)
    f = faulty.divergence
    assert (f.first.step, f.first.kind, f.first.block) == (0, "prefill", 3) and len(f.steps) == 2


def test_two_dumps_are_compared_where_they_read_the_same_tokens(dumps):
    result = run_layer_ab(str(dumps["ckpt"]), parse_setting(f"dump={dumps['root'] / 'clean'}"),
                          parse_setting(f"dump={dumps['root'] / 'faulty'}"))
    d = result.divergence
    assert (d.first.step, d.first.block) == (0, 3) and not d.followed_routing
    assert all(d.errors[(0, b)] == 0.0 for b in range(3))
    a = dump_trace(dumps["root"] / "clean", str(dumps["ckpt"]))
    b = {**a, "steps": [dict(s) for s in a["steps"]]}
    b["steps"][2] = {**b["steps"][2], "input_ids": [a["steps"][2]["input_ids"][0] + 1]}  # B picked another token
    assert [len(t["steps"]) for t in common_steps(a, b)] == [2, 2]


def test_a_folder_that_is_no_dump_says_what_to_do(tmp_path, dumps):
    with pytest.raises(UserError, match="vLLM has no tensor dump .*envs.py"):
        dump_trace(tmp_path, str(dumps["ckpt"]))
    with pytest.raises(UserError, match="no such folder"):
        dump_trace(tmp_path / "absent", str(dumps["ckpt"]))
    with pytest.raises(UserError, match="takes no other key"):
        parse_setting(f"dump={tmp_path},dtype=float32")
