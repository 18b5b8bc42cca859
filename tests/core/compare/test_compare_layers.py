"""The layer-level A/B on a tiny NemotronH (Mamba, attention, MoE blocks): two runs of the same
weights agree at every block, state and step; an injected wrong scale is found at its block in the
prefill; an off-by-one in a conv state update is found in that layer's state after the prefill and
in its output at the first decode step; bf16 routing flips are counted as flips, not as error."""

from __future__ import annotations

import pytest
from server_helpers import tiny_checkpoint

from bringup.core.compare.divergence import compare_traces, describe
from bringup.core.compare.faults import parse_fault
from bringup.core.compare.trace import trace
from bringup.core.errors import UserError

PROMPT = list(range(3, 40))
STEPS = 3


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("ab_models"))


@pytest.fixture(scope="module")
def run(checkpoint):
    def _run(dtype="float32", follow=None, fault=None, own_routing=False, kernels="reference", **kw):
        mp = pytest.MonkeyPatch()
        mp.setenv("BRINGUP_KERNELS", kernels)
        try:
            return trace(str(checkpoint), device="cpu", dtype=dtype, prompt_ids=PROMPT, steps=STEPS, follow=follow,
                         own_routing=own_routing, fault=parse_fault(fault), log=lambda m: None, **kw)
        finally:
            mp.undo()
    return _run


@pytest.fixture(scope="module")
def reference(run):
    return run()


def test_two_runs_of_the_same_weights_agree_everywhere(run, reference):
    other = run(follow=reference)
    d = compare_traces(reference, other)
    assert d.first is None and d.first_state is None and d.flips == 0
    assert [r.kind for r in d.steps] == ["prefill"] + ["decode"] * STEPS
    assert all(e == 0.0 for e in d.errors.values()) and d.state_errors  # the states were compared too
    assert "matches" in describe(d)


def test_a_wrong_scale_in_one_block_is_found_there_in_the_prefill(run, reference):
    d = compare_traces(reference, run(follow=reference, fault="scale@3=1.02"))
    assert (d.first.step, d.first.kind, d.first.block, d.first.cause) == (0, "prefill", 3, "arithmetic")
    assert all(d.errors[(0, b)] == 0.0 for b in range(3))  # nothing before it moved
    assert d.first.rel_err == pytest.approx(0.02, rel=1e-3)


def test_an_off_by_one_in_a_state_update_is_found_in_the_state_then_the_next_step(run, reference):
    d = compare_traces(reference, run(follow=reference, fault="state@0"))
    assert (d.first_state.step, d.first_state.block, d.first_state.what) == (0, 0, "conv state")
    assert all(e == 0.0 for (s, _), e in d.errors.items() if s == 0)  # the prefill's outputs are right
    assert (d.first.step, d.first.kind, d.first.block) == (1, "decode", 0)
    assert "parts first, after step 0" in describe(d)


def test_sketched_traces_find_the_same_faults_at_the_same_places(run):
    """Every tensor digested to checksums and a sketch (as at real size), none kept whole but the one
    asked for: the same blocks and steps are found, the error estimated within the sketch's spread."""
    ref = run(keep_below=0)
    assert all(d.full is None and d.sketch is not None for step in ref["steps"] for d in step["blocks"].values())
    assert compare_traces(ref, run(follow=ref, keep_below=0)).first is None
    scaled = compare_traces(ref, run(follow=ref, fault="scale@3=1.02", keep_below=0))
    assert (scaled.first.step, scaled.first.block) == (0, 3) and scaled.first.rel_err == pytest.approx(0.02, rel=0.25)
    shifted = run(follow=ref, fault="state@0", keep_below=0, keep_full=frozenset({(1, 0)}))
    d = compare_traces(ref, shifted)
    assert (d.first_state.step, d.first_state.block, d.first.step, d.first.block) == (0, 0, 1, 0)
    assert shifted["steps"][1]["blocks"][0].full is not None and shifted["steps"][1]["conv"][0].full is not None
    conv_a, conv_b = d.state_checksums["a"][(0, 0, "conv")], d.state_checksums["b"][(0, 0, "conv")]
    assert conv_a[:2] == pytest.approx(conv_b[:2]) and conv_a[2] != conv_b[2]  # shifted: only the weighted sum moves
    assert d.state_checksums["a"][(0, 0, "ssm")] == d.state_checksums["b"][(0, 0, "ssm")]  # its SSM state was right


@pytest.fixture(scope="module")
def near_tied(checkpoint, tmp_path_factory):
    """The same model with MoE block 2's router near a tie: expert 0 always chosen, expert 3 never,
    experts 1 and 2 all but equal (a ten-millionth apart), so bf16 rounding picks between them."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    folder = tmp_path_factory.mktemp("near_tied") / checkpoint.name
    shutil.copytree(checkpoint, folder)
    weights = load_file(folder / "model.safetensors")
    gate, bias = "backbone.layers.2.mixer.gate.weight", "backbone.layers.2.mixer.gate.e_score_correction_bias"
    w = weights[gate].clone()
    gen = torch.Generator().manual_seed(0)
    w[2] = w[1] + 1e-7 * w[1].abs().mean() * torch.randn(w.shape[1], generator=gen)
    weights[gate] = w
    weights[bias] = torch.tensor([10.0, 0.0, 0.0, -10.0])
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_bf16_routing_flips_are_reported_as_flips(near_tied):
    def run(**kw):
        mp = pytest.MonkeyPatch()
        mp.setenv("BRINGUP_KERNELS", kw.pop("kernels", "reference"))
        try:
            return trace(str(near_tied), device="cpu", prompt_ids=PROMPT, steps=STEPS, log=lambda m: None, **kw)
        finally:
            mp.undo()

    exact = run(dtype="float32")
    followed = compare_traces(exact, run(dtype="bfloat16", follow=exact, kernels="auto"))
    assert followed.flips > 0 and all(set(r.flips) == {2} for r in followed.steps if r.flips)  # only the tied block
    assert followed.first is None or followed.first.cause == "arithmetic"  # B used A's experts: no flip adds error
    assert "Routing flips" in describe(followed) and "add no error" in describe(followed)
    own = compare_traces(exact, run(dtype="bfloat16", follow=exact, kernels="auto", own_routing=True),
                         followed_routing=False)
    assert own.flips > 0
    assert (own.first.block, own.first.cause) == (2, "routing flip")  # the whole-expert difference, named as such


def test_a_state_fault_on_a_block_without_state_is_refused(run):
    with pytest.raises(UserError, match="keeps no recurrent state"):
        run(fault="state@1")
    with pytest.raises(UserError, match="scale@LAYER=FACTOR"):
        parse_fault("scale@x")


def test_the_cli_looks_into_the_first_place_they_part(checkpoint):
    """`bringup ab --layers --full first`: the digests find block 3, both sides run again keeping it
    whole, and the exact error there is the injected 2%, spread over every token (a scale, not one row)."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "bringup", "ab", "--layers", str(checkpoint), "--a", "kernels=reference",
                           "--b", "kernels=reference,fault=scale@3=1.02", "--steps", "1", "--prompt-len", "12",
                           "--full", "first", "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["first"]["step"], doc["first"]["block"]) == (0, 3) and len(doc["prompt_ids"]) == 12
    look, *states = doc["looks"]
    assert (look["step"], look["block"], look["what"], look["shape"][0]) == (0, 3, "output", 12)
    assert look["rel_err"] == pytest.approx(0.02, rel=1e-4) and look["rows_over_half"] == 12
    assert all(s["rel_err"] == 0 for s in states)  # a state layer's own states: the scale came after them


def test_flips_after_the_runs_part_are_said_to_follow_from_that_error(run, reference):
    """B's own expert choice, after its state went wrong, reads a diverged hidden state: those flips are
    the fault's consequence, told apart from near-ties (a fault in a block the MoE blocks follow)."""
    d = compare_traces(reference, run(follow=reference, fault="state@0"))
    assert d.flips > 0 and all(r.step > d.first_state.step for r in d.steps if r.flips)
    assert d.flips_after_parting == d.flips
    assert "all of them after the runs part, following from that error" in describe(d)
    assert d.to_json()["routing_flips_after_parting"] == d.flips


def test_bf16_against_float32_is_judged_against_bf16_noise_block_by_block(run, reference):
    """The reference kernels in bf16 measure bf16's own distance from float32 at each block and step;
    the engine's kernels in bf16 stay within it, while a 2% wrong scale (which bf16's fixed 5e-2
    tolerance lets through) and an off-by-one in a state update go past it, at their block and step."""
    from bringup.core.compare.precision import KERNEL_ROUNDOFFS, roundoff

    noise = compare_traces(reference, run(dtype="bfloat16", follow=reference))
    assert noise.first is None and max(noise.errors.values()) > 1e-3  # bf16 rounding, within bf16's fixed tolerance

    def judged(**kw):
        b = run(dtype="bfloat16", kernels="auto", follow=reference, **kw)
        return compare_traces(reference, b, noise=noise, extra=KERNEL_ROUNDOFFS * roundoff("bfloat16"),
                              calibration="bf16 reference kernels from A + 2 roundoffs", noise_name="bf16 noise")

    right = judged()
    assert right.first is None and right.first_state is None
    assert "within bf16 noise (bf16 reference kernels from A + 2 roundoffs)" in describe(right)
    # the answer itself: A's token's logprob at every step, within bf16's floor (verdict.py's, for servers)
    assert len(right.answer) == STEPS + 1 and 0 < max(right.answer) < right.answer_floor == pytest.approx(25 * 2**-8)
    assert "within the bf16 noise floor 0.098" in describe(right)
    scaled = run(dtype="bfloat16", kernels="auto", follow=reference, fault="scale@3=1.02")
    assert compare_traces(reference, scaled).first is None  # the fixed tolerance misses it
    d = judged(fault="scale@3=1.02")
    assert (d.first.step, d.first.block, d.first.cause) == (0, 3, "arithmetic") and d.first.rel_err > d.first.tolerance
    assert all(d.errors[(0, b)] <= noise.errors[(0, b)] + d.first.tolerance for b in range(3))
    assert "beyond its bf16 noise is block 3 at step 0" in describe(d) and "(tolerances: bf16 reference" in describe(d)
    d = judged(fault="state@0")
    assert (d.first_state.step, d.first_state.block, d.first.step, d.first.block) == (0, 0, 1, 0)
    assert d.answer[0] < d.answer_floor < max(d.answer)  # the prefill's answer is right, the next steps' are not
    assert "past the bf16 noise floor" in describe(d)
    assert d.to_json()["calibration"] and d.to_json()["noise_name"] == "bf16 noise"


def test_the_noise_run_is_the_reference_kernels_in_the_less_precise_dtype():
    from bringup.core.compare.layer_ab import Setting, noise_setting

    c = noise_setting(Setting(dtype="float32", kernels="reference"),
                      Setting(device="cuda", dtype="bfloat16", fault="scale@3=1.02", load_format="dummy"))
    assert (c.device, c.dtype, c.kernels, c.fault, c.load_format) == ("cuda", "bfloat16", "reference", None, "dummy")
    assert noise_setting(Setting(dtype="float32"), Setting(dtype="float32", kernels="reference")) is None
    assert noise_setting(Setting(dtype="bfloat16"), Setting(dtype="float32")) is None  # B is the finer side
    assert noise_setting(Setting(dump="/tmp/d"), Setting(dtype="bfloat16")) is None


def test_the_cli_runs_bf16_rounding_beside_and_finds_the_wrong_scale_past_it(checkpoint):
    """`bringup ab --layers --a float32 --b bfloat16,fault=...`: a third child, the reference kernels in
    bf16, gives each block's tolerance; the output names that source."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "bringup", "ab", "--layers", str(checkpoint), "--a", "kernels=reference",
                           "--b", "dtype=bfloat16,fault=scale@3=1.02", "--steps", "1", "--prompt-ids",
                           ",".join(map(str, PROMPT)), "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["first"]["step"], doc["first"]["block"]) == (0, 3) and doc["noise_name"] == "bf16 noise"
    assert "cpu bfloat16 reference kernels from A + 2 roundoffs of bfloat16" in doc["calibration"]
    assert "B's rounding alone" in done.stderr  # the third child's progress lines
