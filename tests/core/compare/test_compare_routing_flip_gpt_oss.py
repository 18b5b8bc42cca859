"""A bfloat16 routing flip in gpt-oss (its router is `router_topk_softmax`, not a `route_*` op) is
reported as a flip at the block and step where it happens.

The flip is made, not hoped for: gpt-oss's router runs in float32 on the hidden state, so a bf16 run
routes differently from a float32 one only where two experts' logits are closer than the bf16 error
in that hidden state. The test reads both runs' router logits at block 1 in the first decode step,
then raises one unchosen expert's router bias so that in float32 it stays just below the lowest
chosen one, by half the bf16 error between them: float32 keeps its experts, bf16 takes the raised
one. The bias only matters where that expert is chosen, and it stays unchosen for the prompt's last
token, so A's first token (what step 1 reads) does not change."""

from __future__ import annotations

import functools
import shutil

import pytest
import torch
import torch.nn.functional as F

from bringup.core.compare.divergence import compare_traces, describe
from bringup.core.compare.trace import trace

PROMPT = list(range(3, 20))
STEPS, STEP, BLOCK = 3, 1, 1  # the flip: block 1 (the last) in the first decode step


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from family_checkpoints import family_checkpoint

    from bringup.core.sources.default_model import build_tokenizer

    folder = tmp_path_factory.mktemp("gpt_oss") / "tiny"
    family_checkpoint("gpt_oss", folder, build_tokenizer(256))
    return folder


@pytest.fixture(scope="module")
def logged():
    """Runs a trace with the reference kernels, keeping the router logits of each router call in order
    (step 0's blocks, then each decode step's)."""
    from bringup.kernels import reference

    mp = pytest.MonkeyPatch()
    mp.setenv("BRINGUP_KERNELS", "reference")
    calls = []
    router = reference.OPS["router_topk_softmax"]

    @functools.wraps(router)
    def logging_router(hidden, weight, bias, top_k):
        calls.append(F.linear(hidden.float(), weight.float(), bias.float()).detach())
        return router(hidden, weight, bias, top_k)

    mp.setitem(reference.OPS, "router_topk_softmax", logging_router)

    def run(folder, dtype, **kw):
        calls.clear()
        result = trace(str(folder), device="cpu", dtype=dtype, prompt_ids=PROMPT, steps=STEPS, log=lambda m: None, **kw)
        return result, list(calls)

    yield run
    mp.undo()


@pytest.fixture(scope="module")
def flipped(base, logged, tmp_path_factory):
    from safetensors.torch import load_file, save_file

    exact, exact_logits = logged(base, "float32")
    _, bf16_logits = logged(base, "bfloat16", follow=exact)
    blocks = len(exact["layers"])
    call = STEP * blocks + BLOCK
    f32, err = exact_logits[call][0], bf16_logits[call][0] - exact_logits[call][0]
    order = f32.argsort(descending=True).tolist()
    top_k = exact["routing"][BLOCK].shape[1]
    lowest = order[top_k - 1]
    raised = next((e for e in order[top_k:] if err[e] > err[lowest]), None)
    assert raised is not None, "setup: no unchosen expert gains on the chosen ones in bf16 at this step"
    margin = float(err[raised] - err[lowest]) / 2
    shift = float(f32[lowest] - f32[raised]) - margin
    last = exact_logits[BLOCK][-1]  # the prompt's last token at the block, in the prefill
    assert last[raised] + shift < last.sort(descending=True).values[top_k - 1], "setup: the raised expert would change A's first token"

    folder = tmp_path_factory.mktemp("gpt_oss_flip") / "tiny"
    shutil.copytree(base, folder)
    weights = load_file(folder / "model.safetensors")
    weights[f"model.layers.{BLOCK}.mlp.router.bias"][raised] += shift
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    a, _ = logged(folder, "float32")
    assert a["sampled"][STEP - 1] == exact["sampled"][STEP - 1]
    return folder, a


def test_a_bf16_routing_flip_in_gpt_oss_is_counted_where_it_happens(flipped, logged):
    folder, a = flipped
    followed = compare_traces(a, logged(folder, "bfloat16", follow=a)[0])
    first_flip = next(r for r in followed.steps if r.flips)
    assert (first_flip.step, set(first_flip.flips)) == (STEP, {BLOCK})
    assert followed.first is None or followed.first.cause == "arithmetic"  # B used A's experts
    assert f"block {BLOCK} step {STEP}" in describe(followed)
    assert followed.first is not None or followed.flips_after_parting == 0  # near-ties, not an error's wake


def test_with_its_own_routing_the_flip_is_the_divergence_named_as_such(flipped, logged):
    folder, a = flipped
    own = compare_traces(a, logged(folder, "bfloat16", follow=a, own_routing=True)[0], followed_routing=False)
    assert (own.first.step, own.first.block, own.first.cause) == (STEP, BLOCK, "routing flip")
    assert all(not r.flips for r in own.steps[:STEP])
