"""The Engine end to end on tiny random-weight NemotronH and Llama checkpoints (fp32):
greedy output equals transformers', across batching, chunked prefill and preemption; pools end empty.

The engine runs on CPU unless BRINGUP_TEST_DEVICE names another device (e.g. cuda, xpu); the
transformers reference always runs on CPU.
"""

import os

import pytest

from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.pools import PoolLayerError
from bringup.core.engine.request import RequestRejected
from bringup.core.engine.sampling import SamplingParams

from engine_helpers import hf_greedy, prompts_of_lengths, tiny_llama, tiny_nemotron_h

pytestmark = pytest.mark.slow  # starts a real engine or server

LENGTHS = [3, 21, 9, 40]
NEW = 6
DEVICE = os.environ.get("BRINGUP_TEST_DEVICE", "cpu")
GREEDY = SamplingParams(max_new_tokens=NEW, temperature=0, ignore_eos=True)


@pytest.fixture(scope="module", params=["nemotron_h", "llama"])
def checkpoint(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    build = tiny_nemotron_h if request.param == "nemotron_h" else tiny_llama
    build(folder)
    prompts = prompts_of_lengths(LENGTHS, 400, seed=len(request.param))
    return request.param, folder, prompts, hf_greedy(folder, prompts, NEW)


def quiet_engine(folder, **kwargs):
    lines = []
    engine = Engine(EngineConfig(str(folder), device=DEVICE, **kwargs), log=lines.append)
    return engine, lines


def test_batched_greedy_equals_transformers(checkpoint):
    kind, folder, prompts, expected = checkpoint
    engine, lines = quiet_engine(folder, chunked_prefill_size=16)  # the 21- and 40-token prompts are chunked
    assert engine.generate(prompts, GREEDY) == expected
    engine.check_pools()
    stats = engine.stats()
    assert stats["kv_tokens_used"] == 0 and stats["state_slots_used"] == 0 and stats["num_running"] == 0
    assert stats["prompt_tokens_total"] == sum(LENGTHS) and stats["generated_tokens_total"] == NEW * len(LENGTHS)
    assert any(l.startswith("Load weight end.") and "type=" in l for l in lines)
    assert any(l.startswith("KV Cache is allocated. dtype: float32, #tokens: ") for l in lines)
    assert any(l.startswith("Mamba Cache is allocated. max_mamba_cache_size: ") for l in lines) == (kind == "nemotron_h")


def test_fused_qkv_projection_gives_the_same_tokens(checkpoint, monkeypatch):
    """On accelerators NemotronH's attention runs q, k and v as one GEMM over their concatenated
    weights; forced on here (the CPU keeps three), the tokens stay transformers'."""
    kind, folder, prompts, expected = checkpoint
    if kind != "nemotron_h":
        pytest.skip("NemotronH's attention fuses q/k/v")
    from bringup.core.engine.models.nemotron_h import Attention

    monkeypatch.setattr(Attention, "fuse_qkv", True)
    engine, _ = quiet_engine(folder, chunked_prefill_size=16)
    assert engine.generate(prompts, GREEDY) == expected
    fused = [m for m in engine.model.modules() if isinstance(m, Attention)]
    assert fused and all(getattr(m, "_qkv", None) is not None for m in fused)


def test_preemption_recomputes_to_the_same_tokens(checkpoint):
    kind, folder, prompts, expected = checkpoint
    # 12 pages of 4 tokens: the first three prompts are admitted together (10 pages) and outgrow
    # the pool while decoding; the 40-token one fits only alone.
    engine, _ = quiet_engine(folder, page_size=4, max_total_tokens=48, chunked_prefill_size=32)
    assert engine.stats()["kv_pages_total"] == 12  # the requests' pages (graphs add a padding page beyond)
    assert engine.generate(prompts, GREEDY) == expected
    stats = engine.stats()
    assert stats["preemptions_total"] > 0 and stats["recomputed_tokens_total"] > 0
    assert stats["prompt_tokens_total"] == sum(LENGTHS)  # recomputation is not counted as new prompt
    engine.check_pools()


def test_pools_hold_only_their_layers(checkpoint):
    kind, folder, _, _ = checkpoint
    engine, _ = quiet_engine(folder)
    info = engine.server_info()
    assert info["kv_layers"] == engine.layer_map.kv_layers
    assert info["state_layers"] == engine.layer_map.state_layers
    missing = next(i for i in range(engine.layer_map.num_layers) if i not in info["kv_layers"]) \
        if kind == "nemotron_h" else None
    if missing is not None:
        with pytest.raises(PoolLayerError, match=f"layer {missing} is not in the KV pool; it holds layers"):
            engine.kv_pool.k(missing)
    for key in ("kv_tokens", "state_slots", "max_running_requests", "weights_bytes", "kv_bytes_per_token"):
        assert key in info["predicted"] and key in info["allocated"]
    assert info["allocated"]["kv_tokens"] == info["predicted"]["kv_tokens"]
    assert info["allocated"]["kv_bytes_per_token"] == info["predicted"]["kv_bytes_per_token"]
    if kind == "nemotron_h":
        assert info["allocated"]["state_slots"] == info["predicted"]["state_slots"]
        assert info["allocated"]["state_bytes_per_request"] == info["predicted"]["state_bytes_per_request"]


@pytest.fixture(scope="module")
def nemotron(tmp_path_factory):
    return tiny_nemotron_h(tmp_path_factory.mktemp("nemo"))


def test_abort_frees_at_once_and_reports(nemotron):
    engine, _ = quiet_engine(nemotron)
    a = engine.add_request(list(range(5, 25)), SamplingParams(max_new_tokens=50, ignore_eos=True))
    b = engine.add_request(list(range(5, 15)), SamplingParams(max_new_tokens=3, ignore_eos=True, temperature=0))
    engine.step()
    assert engine.stats()["state_slots_used"] == 2
    assert engine.abort(a)
    assert engine.stats()["state_slots_used"] == 1  # freed now, not at the next step
    engine.check_pools()
    outs = {}
    while engine.has_unfinished():
        for out in engine.step():
            outs.setdefault(out.request_id, []).append(out)
    assert outs[a][-1].finished and outs[a][-1].finish_reason == "abort"
    assert outs[b][-1].finish_reason == "length" and outs[b][-1].completion_tokens == 3
    assert not engine.abort(a) and not engine.abort("nope")
    engine.check_pools()
    assert engine.stats()["kv_tokens_used"] == 0


def test_stop_string_trims_text(nemotron):
    engine, _ = quiet_engine(nemotron)
    prompt = engine.tokenizer.encode("The model says")
    full = _run_text(engine, prompt, SamplingParams(max_new_tokens=12, temperature=0, ignore_eos=True))
    text = "".join(o.text for o in full)
    assert full[-1].finish_reason == "length" and len(text) > 4
    stop = text[len(text) // 2:len(text) // 2 + 2]
    outs = _run_text(engine, prompt, SamplingParams(max_new_tokens=12, temperature=0, ignore_eos=True, stop=[stop]))
    assert outs[-1].finish_reason == "stop"
    assert "".join(o.text for o in outs) == text[:text.index(stop)]
    engine.check_pools()


def test_seeded_sampling_is_reproducible_in_any_batch(nemotron):
    engine, _ = quiet_engine(nemotron)
    prompt = list(range(10, 20))
    seeded = SamplingParams(max_new_tokens=8, temperature=1.0, seed=1234, ignore_eos=True)
    alone = engine.generate([prompt], seeded)[0]
    crowd = engine.generate([list(range(30, 47)), prompt, [5, 6, 7]],
                            [SamplingParams(max_new_tokens=8, ignore_eos=True), seeded, SamplingParams(max_new_tokens=4)])
    assert crowd[1] == alone
    other = engine.generate([prompt], SamplingParams(max_new_tokens=8, temperature=1.0, seed=99, ignore_eos=True))[0]
    assert other != alone


def test_refuses_what_can_never_run(nemotron):
    engine, _ = quiet_engine(nemotron, page_size=4, max_total_tokens=32)
    with pytest.raises(RequestRejected, match="needs 9 KV pages"):
        engine.add_request(list(range(3, 35)), GREEDY)
    with pytest.raises(RequestRejected, match="outside the vocabulary"):
        engine.add_request([3, 10**6], GREEDY)
    with pytest.raises(RequestRejected, match="empty"):
        engine.add_request([], GREEDY)
    assert not engine.has_unfinished()
    # A request that fills the pool alone ends with "length" and a reason, and frees everything.
    out = engine.generate([list(range(3, 20))], SamplingParams(max_new_tokens=100, ignore_eos=True))[0]
    assert len(out) == 32 - 17 + 1
    engine.check_pools()


def _run_text(engine, prompt, params):
    rid = engine.add_request(prompt, params)
    outs = []
    while engine.has_unfinished():
        outs += [o for o in engine.step() if o.request_id == rid]
    return outs


def test_running_limit_and_queue(nemotron):
    engine, _ = quiet_engine(nemotron, max_running_requests=2)
    assert engine.server_info()["max_running_requests"] == 2 and engine.state_pool.num_slots == 2
    for n in (4, 5, 6, 7):
        engine.add_request(list(range(3, 3 + n)), SamplingParams(max_new_tokens=3, ignore_eos=True))
    engine.step()
    stats = engine.stats()
    assert (stats["num_running"], stats["num_queued"], stats["state_slots_used"]) == (2, 2, 2)
    with pytest.raises(RuntimeError, match="other requests are in flight"):
        engine.generate([[5, 6]], GREEDY)
    finished = 0
    while engine.has_unfinished():
        assert engine.stats()["num_running"] <= 2
        finished += sum(o.finished for o in engine.step())
    assert finished == 4
    engine.check_pools()


def test_startup_lines_parse_like_sglang(nemotron):
    """The GUI follows our start-up with the parser it uses for SGLang: every figure must come through."""
    from bringup.core.client.startup_log import StartupState, line_severity

    engine, lines = quiet_engine(nemotron, page_size=8)
    state = StartupState()
    for line in lines:
        state.feed(line)
        assert line_severity(line) == "info", line
    f = state.figures
    assert state.stage == "state pool allocated"
    assert f["model_class"] == "NemotronHForCausalLM"
    assert f["kv_tokens"] == engine.kv_pool.capacity_tokens and f["kv_dtype"] == "float32"
    assert f["state_slots"] == engine.state_pool.num_slots
    assert {"weights_gb", "avail_mem_gb", "k_size_gb", "v_size_gb", "conv_state_gb", "ssm_state_gb"} <= set(f)


def test_batch_lines_like_sglang(nemotron):
    engine, lines = quiet_engine(nemotron, decode_log_interval=2)
    engine.generate([[5, 6, 7], list(range(3, 20))], SamplingParams(max_new_tokens=5, ignore_eos=True))
    prefill = [l for l in lines if l.startswith("Prefill batch, ")]
    decode = [l for l in lines if l.startswith("Decode batch, ")]
    assert prefill[0].startswith("Prefill batch, #new-seq: 2, #new-token: 20, #cached-token: 0, full token usage: ")
    assert "mamba usage: " in prefill[0] and "#running-req: 2, #queue-req: 0, input throughput (token/s): " in prefill[0]
    assert len(decode) == 2  # 4 decode steps, a line every 2
    assert decode[0].startswith("Decode batch, #running-req: 2, #full token: ")
    assert "mamba num: 2, mamba usage: " in decode[0] and "gen throughput (token/s): " in decode[0]
    assert "cpu graph: False" in decode[0]  # (eager steps: the suite turns the CPU's compiled step off)


def test_the_first_decode_line_does_not_count_the_start_up(monkeypatch):
    from bringup.core.engine import batch_log

    clock = iter([100.0, 160.0, 161.0])  # built at 100, start-up over at 160 (a compile), line at 161
    monkeypatch.setattr(batch_log.time, "monotonic", lambda: next(clock))
    lines = []
    log = batch_log.BatchLog(lines.append, interval=1)
    log.restart()
    stats = {"kv_tokens_used": 0, "kv_tokens_total": 8, "state_slots_used": 1, "state_slots_total": 2,
             "num_running": 1, "num_queued": 0}
    log.after_step(new_seqs=0, prefill_tokens=0, decode_tokens=4, seconds=0.1, stats=stats, graphed=True)
    assert "cpu graph: True, gen throughput (token/s): 4.00," in lines[0]


def test_a_smaller_mixed_budget_keeps_the_tokens_and_is_shown(checkpoint):
    """Prompt tokens beside decodes held to --mixed-prefill-size, the whole chunk otherwise: the
    same greedy tokens; the start-up log and server_info name both budgets."""
    from bringup.core.engine.warmup import step_summary

    kind, folder, prompts, expected = checkpoint
    engine, lines = quiet_engine(folder, chunked_prefill_size=16, mixed_prefill_size=4)
    ids = [engine.add_request(p, GREEDY, detokenize=False) for p in prompts[:2]]  # 3 and 21 tokens
    steps, late = [], prompts[2:]
    outputs = {}
    while engine.has_unfinished():
        if len(steps) == 2:  # the later prompts arrive while the first ones decode
            ids += [engine.add_request(p, GREEDY, detokenize=False) for p in late]
        for out in engine.step():
            outputs.setdefault(out.request_id, []).extend(out.token_ids)
        if engine.last_step is not None and engine.last_step.requests:
            steps.append(step_summary(engine.last_step))
    assert [outputs[i] for i in ids] == expected
    mixed = [s["prompt_tokens"] for s in steps if s["decodes"]]
    alone = [s["prompt_tokens"] for s in steps if not s["decodes"]]
    assert max(mixed) == 4 and max(alone) == 16  # both budgets reached, neither passed
    assert any("Prompt tokens per step: 4 beside the running requests' decodes (--mixed-prefill-size's choice), "
               "16 in a step without decodes (--chunked-prefill-size's choice)" in line for line in lines)
    info = engine.server_info()
    assert (info["chunked_prefill_size"], info["mixed_prefill_size"]) == (16, 4)
    engine.check_pools()
