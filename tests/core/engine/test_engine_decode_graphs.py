"""Decode graphs (on by default where the device has them, eager on the CPU), tested on the CPU: the bucketing and padding, and the engine
end to end with a stand-in for the graph that re-runs the captured call on the static inputs, so
padding rows, the reserved scratch page/slot and the copies into the static batch are all checked
(the real torch.cuda.CUDAGraph capture has not been run here: no GPU)."""

from __future__ import annotations

import pytest
import torch

from bringup.core.engine.decode_graphs import PADDING_OWNER, bucket_for, buckets_up_to, pad_decode
from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams
from bringup.core.errors import UserError

from engine_helpers import prompts_of_lengths, tiny_llama, tiny_nemotron_h


def test_buckets_cover_every_batch_up_to_the_limit():
    assert buckets_up_to(5) == (1, 2, 4, 5)
    assert buckets_up_to(64)[-3:] == (32, 48, 64)
    assert buckets_up_to(1) == (1,)
    assert bucket_for(3, (1, 2, 4, 5)) == 4 and bucket_for(5, (5, 1)) == 5 and bucket_for(6, (1, 2, 4, 5)) is None
    with pytest.raises(ValueError):
        buckets_up_to(0)


def test_padding_rows_live_in_the_scratch_page_and_slot():
    p = pad_decode([11, 12], [5, 9], [[3, 4], [7, 8, 2]], [1, 0], bucket=4, width=3, scratch_page=9, scratch_slot=6)
    assert p.token_chunks == [[11], [12], [0], [0]]
    assert p.prefix_lens == [5, 9, 0, 0]
    assert p.block_tables == [[3, 4], [7, 8, 2], [9], [9]]
    assert p.state_slots == [1, 0, 6, 6]
    with pytest.raises(ValueError, match="do not fit"):
        pad_decode([1, 2, 3], [1, 1, 1], [[0]] * 3, [0, 1, 2], bucket=2, width=1, scratch_page=0, scratch_slot=0)
    with pytest.raises(ValueError, match="captured width"):
        pad_decode([1], [1], [[0, 1]], [0], bucket=1, width=1, scratch_page=0, scratch_slot=0)


class ReplayStandIn:
    """What the runner asks of a graph: capture returns the output tensor, replay refills it."""

    replays = 0

    def capture(self, fn):
        self.fn = fn
        self.out = fn()
        return self.out

    def replay(self):
        ReplayStandIn.replays += 1
        self.out.copy_(self.fn())


@pytest.mark.parametrize("build", [tiny_nemotron_h, tiny_llama], ids=["nemotron_h", "llama"])
def test_engine_with_graph_decode_gives_the_same_tokens(build, tmp_path):
    folder = build(tmp_path / "ckpt")
    prompts = prompts_of_lengths([3, 17, 9, 30, 5], 400, seed=3)
    params = SamplingParams(max_new_tokens=7, temperature=0, ignore_eos=True)
    plain = Engine(EngineConfig(str(folder), device="cpu", max_running_requests=4), log=lambda m: None)
    expected = plain.generate(prompts, params)

    graphed = Engine(EngineConfig(str(folder), device="cpu", max_running_requests=4, cuda_graphs=True),
                     log=lambda m: None, graph_factory=ReplayStandIn)
    assert graphed.decode_graphs.buckets == (1, 2, 4)
    before = ReplayStandIn.replays
    assert graphed.generate(prompts, params) == expected
    assert ReplayStandIn.replays - before >= 6  # decode steps went through the graphs
    graphed.check_pools()  # the scratch page and slot are known, nothing else is held
    pages, slots = graphed.scheduler.owners()
    assert list(pages) == [PADDING_OWNER] and list(slots) == [PADDING_OWNER]


def test_one_running_request_with_graphs_runs_and_every_request_finishes(tmp_path):
    """The padding rows' slot used to be one of the plan's: at --max-running-requests 1 no request
    could ever start (with N, only N-1 ran). The slot is now allocated beyond the plan."""
    folder = tiny_nemotron_h(tmp_path / "ckpt")
    engine = Engine(EngineConfig(str(folder), device="cpu", max_running_requests=1, cuda_graphs=True),
                    log=lambda m: None, graph_factory=ReplayStandIn)
    assert engine.decode_graphs.buckets == (1,)
    assert engine.state_pool.num_free_slots == 1  # the plan's one slot, free for the request
    prompts = prompts_of_lengths([4, 6, 3], 400, seed=1)
    params = SamplingParams(max_new_tokens=3, temperature=0, ignore_eos=True)
    running = []
    for p in prompts:
        engine.add_request(p, params, detokenize=False)
    done, steps = 0, 0
    while engine.has_unfinished() and steps < 100:
        done += sum(o.finished for o in engine.step())
        running.append(len(engine.scheduler.running))
        steps += 1
    assert done == 3, f"only {done} of 3 requests finished in {steps} steps (deadlock)"
    assert max(running) == 1
    engine.check_pools()
    # The padding page and slot are beyond the plan: the stats (Run tab, /metrics) show the
    # requests' pools, empty once they finish, with the plan's totals.
    stats = engine.stats()
    assert (stats["kv_tokens_used"], stats["kv_pages_used"], stats["state_slots_used"]) == (0, 0, 0)
    assert stats["kv_tokens_total"] == engine.plan.kv_tokens and stats["state_slots_total"] == 1
    assert engine.kv_pool.num_pages == stats["kv_pages_total"] + 1  # the padding page


def test_a_prompt_that_needs_the_padding_page_is_refused(tmp_path):
    """The requests can never have the reserved page: a prompt needing one page more than the
    plan's is refused at once instead of waiting for a page that never frees."""
    from bringup.core.engine.scheduler import RequestRejected

    folder = tiny_nemotron_h(tmp_path / "ckpt")
    engine = Engine(EngineConfig(str(folder), device="cpu", max_running_requests=1, cuda_graphs=True, page_size=4,
                                 max_total_tokens=16), log=lambda m: None, graph_factory=ReplayStandIn)
    usable = engine.stats()["kv_pages_total"]
    assert usable == 4 and engine.kv_pool.num_pages == 5
    with pytest.raises(RequestRejected, match="holds only 4 pages"):
        engine.add_request(list(range(3, 3 + 4 * usable)), SamplingParams(max_new_tokens=1), detokenize=False)


def test_static_block_tables_follow_requests_that_come_go_and_grow(tmp_path):
    """A decode step writes only the block-table entries that changed (new pages, a new request in a
    row, a row turned padding): after every step each live row holds its request's pages and each
    padding row starts at the scratch page, as a full rewrite would leave them."""
    folder = tiny_nemotron_h(tmp_path / "ckpt")
    engine = Engine(EngineConfig(str(folder), device="cpu", max_running_requests=4, cuda_graphs=True, page_size=4),
                    log=lambda m: None, graph_factory=ReplayStandIn)
    graphs = engine.decode_graphs
    prompts = prompts_of_lengths([3, 9, 5, 14, 2, 7], 400, seed=4)
    for i, p in enumerate(prompts):  # different lengths: requests leave at different steps, others take their rows
        engine.add_request(p, SamplingParams(max_new_tokens=3 + 4 * (i % 3), temperature=0, ignore_eos=True),
                           detokenize=False)
    checked = []
    run = graphs.run

    def run_and_check(tokens, prefix_lens, block_tables, state_slots, future=None, swa_block_tables=None):
        logits = run(tokens, prefix_lens, block_tables, state_slots, future=future, swa_block_tables=swa_block_tables)
        bucket = next(b for b in graphs.buckets if b >= len(tokens))
        table = graphs._graphs[bucket][1].block_tables
        for row, pages in enumerate(block_tables):
            assert table[row, : len(pages)].tolist() == list(pages), f"row {row} of bucket {bucket}"
        for row in range(len(tokens), bucket):
            assert int(table[row, 0]) == graphs.scratch_page
        checked.append(len(tokens))
        return logits

    graphs.run = run_and_check
    while engine.has_unfinished():
        engine.step()
    checked = len(checked)
    assert checked >= 10
    engine.check_pools()


def test_capturing_late_without_a_spare_slot_is_refused(tmp_path):
    folder = tiny_nemotron_h(tmp_path / "ckpt")
    engine = Engine(EngineConfig(str(folder), device="cpu", max_running_requests=1, cuda_graphs=False),
                    log=lambda m: None)
    with pytest.raises(UserError, match="padding slot"):
        engine.capture_decode_graphs(graph_factory=ReplayStandIn)


def test_cuda_graphs_on_a_cpu_engine_is_a_user_error(tmp_path, monkeypatch):
    folder = tiny_llama(tmp_path / "ckpt")
    with pytest.raises(UserError, match="CUDA graphs need a CUDA device"):
        Engine(EngineConfig(str(folder), device="cpu", cuda_graphs=True), log=lambda m: None)
    monkeypatch.setenv("BRINGUP_CUDA_GRAPHS", "1")
    with pytest.raises(UserError, match="unset BRINGUP_CUDA_GRAPHS"):
        Engine(EngineConfig(str(folder), device="cpu"), log=lambda m: None)
    monkeypatch.setenv("BRINGUP_CUDA_GRAPHS", "0")
    assert Engine(EngineConfig(str(folder), device="cpu"), log=lambda m: None).decode_graphs is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="real CUDA graphs need a CUDA device")
def test_real_cuda_graphs_give_the_same_tokens(tmp_path):
    folder = tiny_nemotron_h(tmp_path / "ckpt")
    prompts = prompts_of_lengths([3, 17, 9, 30, 5], 400, seed=3)
    params = SamplingParams(max_new_tokens=7, temperature=0, ignore_eos=True)
    plain = Engine(EngineConfig(str(folder), device="cuda", max_running_requests=4), log=lambda m: None)
    expected = plain.generate(prompts, params)
    del plain
    graphed = Engine(EngineConfig(str(folder), device="cuda", max_running_requests=4, cuda_graphs=True),
                     log=lambda m: None)
    assert graphed.decode_graphs is not None and graphed.decode_graphs.buckets == (1, 2, 4)
    assert graphed.generate(prompts, params) == expected
    graphed.check_pools()


@pytest.mark.parametrize("model_type", ["gemma3_text", "gpt_oss"])
def test_sliding_window_models_decode_through_the_graphs(model_type, tmp_path):
    """Sliding layers beside full ones keep an SWA pool; the graphs carry its block tables and slot
    mapping too. Prompts longer than the window make pages leave it mid-decode: the tokens stay the
    eager engine's, each live row's static SWA entries are the request's pages (those the window has
    left may be stale: never read), padding rows start at the scratch SWA page, and the pools end
    holding only the padding page, slot and SWA page."""
    from engine_helpers import tiny_sliding

    folder = tiny_sliding(tmp_path / "ckpt", model_type, window=8)
    prompts = prompts_of_lengths([3, 21, 9, 13], 400, seed=3)
    params = SamplingParams(max_new_tokens=9, temperature=0, ignore_eos=True)
    common = dict(device="cpu", max_running_requests=4, page_size=4, chunked_prefill_size=16)
    plain = Engine(EngineConfig(str(folder), **common), log=lambda m: None)
    assert plain.swa_pool is not None
    expected = plain.generate(prompts, params)

    graphed = Engine(EngineConfig(str(folder), **common, cuda_graphs=True), log=lambda m: None,
                     graph_factory=ReplayStandIn)
    graphs = graphed.decode_graphs
    assert graphs is not None and graphs.swa_pool is graphed.swa_pool
    run, checked = graphs.run, []

    def run_and_check(tokens, prefix_lens, block_tables, state_slots, future=None, swa_block_tables=None):
        logits = run(tokens, prefix_lens, block_tables, state_slots, future=future, swa_block_tables=swa_block_tables)
        bucket = next(b for b in graphs.buckets if b >= len(tokens))
        static = graphs._graphs[bucket][1]
        ps = graphed.swa_pool.page_size
        for row, (pages, prefix) in enumerate(zip(swa_block_tables, prefix_lens)):
            live = [(i, p) for i, p in enumerate(pages) if p is not None]
            assert [int(static.swa_block_tables[row, i]) for i, _ in live] == [p for _, p in live]
            assert int(static.swa_slot_mapping[row]) == pages[prefix // ps] * ps + prefix % ps
        for row in range(len(tokens), bucket):
            assert int(static.swa_block_tables[row, 0]) == graphs.scratch_swa_page
            assert int(static.swa_slot_mapping[row]) == graphs.scratch_swa_page * ps
        checked.append(any(None in pages for pages in swa_block_tables))
        return logits

    graphs.run = run_and_check
    assert graphed.generate(prompts, params) == expected
    assert len(checked) >= 8 and any(checked)  # decode steps replayed, some after pages left the window
    graphed.check_pools()
    assert graphed.scheduler.swa_owners() == {PADDING_OWNER: [graphs.scratch_swa_page]}
    stats = graphed.stats()
    assert stats["swa_tokens_used"] == 0
    assert stats["swa_tokens_total"] == graphed.swa_pool.capacity_tokens - graphed.swa_pool.page_size


def test_pad_decode_pads_swa_tables_with_the_scratch_swa_page():
    p = pad_decode([11], [5], [[3, 4]], [1], bucket=3, width=2, scratch_page=9, scratch_slot=6,
                   swa_block_tables=[[None, 8]], scratch_swa_page=2)
    assert p.swa_block_tables == [[None, 8], [2], [2]]
    with pytest.raises(ValueError, match="go together"):
        pad_decode([11], [5], [[3, 4]], [1], bucket=1, width=2, scratch_page=9, scratch_slot=6,
                   swa_block_tables=[[None, 8]])
