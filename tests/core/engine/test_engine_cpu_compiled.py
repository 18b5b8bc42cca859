"""The CPU's compiled decode step (core/engine/cpu_compiled_decode.py) and the opaque kernels it calls
(kernels/cpu/opaque.py): same tokens as eager steps, one compile for every batch size and context
length, a failed compile leaves eager steps. (Its speed is `bringup bench`'s to show, not a test's.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bringup.core.engine import cpu_compiled_decode
from bringup.core.engine.cpu_compiled_decode import CompiledDecode
from bringup.core.engine.sampling import SamplingParams
from bringup.kernels.cpu import linear as cpu_linear
from bringup.kernels.cpu import moe as cpu_moe
from bringup.kernels.cpu import onednn_packed
from bringup.kernels.cpu.paged_attention_decode import paged_attention_decode
from bringup.kernels.reference.paged_attention_decode import paged_attention_decode as reference_attention
from engine_helpers import tiny_nemotron_h


def _traced(fn):
    """fn compiled as one graph (aot_eager: traced through the fakes and run, no C++ compile)."""
    return torch.compile(fn, backend="aot_eager", fullgraph=True)


def test_opaque_linear_runs_its_own_choice_inside_a_graph():
    torch.manual_seed(0)
    weight = nn.Parameter(torch.randn(48, 32), requires_grad=False)  # a parameter: packed from 3 rows
    bias = torch.randn(48)
    for rows in (1, 5):
        x = torch.randn(rows, 32)
        got = _traced(lambda x: F.silu(cpu_linear.linear(x, weight, bias)))(x)
        torch.testing.assert_close(got, F.silu(F.linear(x, weight, bias)), rtol=1e-5, atol=1e-5)
    if onednn_packed.USABLE:
        assert onednn_packed.packed_bytes(nn.ParameterList([weight])) > 0  # the 5-row product packed it


@pytest.mark.parametrize("tokens", [1, 8])  # "each" and "dense" forms, chosen at run time
def test_opaque_moe_matches_eager_inside_a_graph(tokens):
    torch.manual_seed(1)
    E, I, H, S = 4, 16, 32, 24
    up = nn.Parameter(torch.randn(E, I, H) * 0.2, requires_grad=False)
    down = nn.Parameter(torch.randn(E, H, I) * 0.2, requires_grad=False)
    shared_up = nn.Parameter(torch.randn(S, H) * 0.2, requires_grad=False)
    shared_down = nn.Parameter(torch.randn(H, S) * 0.2, requires_grad=False)
    x = torch.randn(tokens, H)
    weights, ids = torch.rand(tokens, 2), torch.randint(0, E, (tokens, 2))

    def layer(x, weights, ids):
        return cpu_moe.moe_experts_shared(x, weights, ids, up, down, shared_up, shared_down, "relu2") * 2 \
            + cpu_moe.moe_experts(x, weights, ids, up, down, None, "relu2")

    torch.testing.assert_close(_traced(layer)(x, weights, ids), layer(x, weights, ids), rtol=1e-5, atol=1e-5)


def test_opaque_decode_attention_matches_the_reference_inside_a_graph():
    torch.manual_seed(2)
    pages, page, Hkv, Hq, D = 6, 4, 2, 4, 8
    k_cache, v_cache = torch.randn(pages, page, Hkv, D), torch.randn(pages, page, Hkv, D)
    q = torch.randn(3, Hq, D)
    tables = torch.tensor([[1, 2, 0], [3, 0, 0], [4, 5, 2]], dtype=torch.int32)
    lens = torch.tensor([7, 2, 11], dtype=torch.int32)
    got = _traced(lambda q: paged_attention_decode(q, k_cache, v_cache, tables, lens, 0.3) + 1)(q)
    torch.testing.assert_close(got, reference_attention(q, k_cache, v_cache, tables, lens, 0.3) + 1,
                               rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return tiny_nemotron_h(tmp_path_factory.mktemp("compiled") / "tiny")


@pytest.fixture(autouse=True)
def fresh_saved_steps(tmp_path, monkeypatch):
    """Each test starts with no saved decode step (saved_decode_step.py): one saved by an earlier run
    would be loaded instead of compiled."""
    from bringup.core.engine import saved_decode_step

    monkeypatch.setattr(saved_decode_step, "steps_dir", lambda cache: tmp_path / "steps")
    return tmp_path / "steps"


def _engine(folder, compiled: bool, log=None):
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine

    return Engine(EngineConfig(str(folder), device="cpu", max_running_requests=4, cpu_threads=1, cpu_compile=compiled),
                  log=log or (lambda m: None))


def _workload(engine):
    vocab = int(engine.vocab_size or len(engine.tokenizer))
    prompts = [[(7 * i + 3 * j) % vocab for j in range(n)] for i, n in enumerate((5, 19, 12, 3, 30, 9))]
    # Different lengths: batches of 4 down to 1 request, contexts of one to three pages.
    params = [SamplingParams(max_new_tokens=n, temperature=0.0, ignore_eos=True) for n in (9, 4, 14, 6, 11, 2)]
    return prompts, params


@pytest.mark.parametrize("one_graph", [cpu_compiled_decode.ONE_GRAPH, False], ids=["this torch", "two graphs"])
def test_compiled_decode_gives_the_eager_tokens_with_one_compile(tiny_folder, one_graph, monkeypatch):
    if one_graph is False and not cpu_compiled_decode.ONE_GRAPH:
        pytest.skip("this torch compiles two graphs anyway (the first case)")
    # False: the path of a torch without mark_unbacked(shape_id=...): a lone request's graph beside the batches'
    monkeypatch.setattr(cpu_compiled_decode, "ONE_GRAPH", one_graph)
    monkeypatch.setattr(cpu_compiled_decode.CompiledDecode.__init__, "__defaults__", (one_graph, True))
    torch._dynamo.reset()  # (one engine per process in use; here, graphs of an earlier case would serve this one)
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    lines = []
    compiled = _engine(tiny_folder, True, lines.append)
    assert compiled.runner.compiled_decode is not None, lines
    assert any("decode step compiled in" in line for line in lines), lines
    assert compiled.server_info()["cpu_compiled_decode_seconds"] > 0
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert graphs - before == (1 if one_graph else 2)
    prompts, params = _workload(compiled)
    splits, split = [], compiled.runner._forward_split
    compiled.runner._forward_split = lambda step, d, p: splits.append((len(d), len(p))) or split(step, d, p)
    got = compiled.generate(prompts, params)
    # 6 requests on 4 slots: the late ones join running decodes; those mixed steps ran their decode rows
    # compiled and their prompt rows eagerly, and the tokens are the eager engine's below.
    assert splits and all(d >= 1 and p >= 1 for d, p in splits)
    # The warm-up compiled every size: batches of 1 to 4 and growing contexts compiled nothing new.
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs
    assert compiled.stats()["state_slots_used"] == 0 and compiled.stats()["kv_tokens_used"] == 0

    eager = _engine(tiny_folder, False)
    assert eager.runner.compiled_decode is None and eager.server_info()["cpu_compiled_decode_seconds"] is None
    assert got == eager.generate(prompts, params)


def test_a_second_start_loads_the_saved_step_without_tracing(tiny_folder, fresh_saved_steps):
    if not cpu_compiled_decode.saved_decode_step.available():
        pytest.skip("this torch saves no compiled functions")
    torch._dynamo.reset()
    lines = []
    first = _engine(tiny_folder, True, lines.append)
    # The line names where the compile went, in torch's own timers (a loaded step has none to name).
    assert any("decode step compiled in" in line and "saved to" in line and "(dynamo trace " in line
               and ", AOT autograd and inductor " in line for line in lines), lines
    assert len(list(fresh_saved_steps.glob("*.bin"))) == 1
    prompts, params = _workload(first)
    want = first.generate(prompts, params)

    torch._dynamo.reset()  # as a new process: nothing traced yet
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    lines = []
    second = _engine(tiny_folder, True, lines.append)
    assert any("decode step loaded in" in line and "loaded from" in line and "dynamo trace" not in line
               for line in lines), lines
    assert second.generate(prompts, params) == want == _engine(tiny_folder, False).generate(prompts, params)
    # Batches of 1 to 4 and contexts of one to three pages ran the loaded step: dynamo traced nothing.
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == before


def test_an_unreadable_saved_step_is_compiled_again(tiny_folder, fresh_saved_steps, monkeypatch):
    if not cpu_compiled_decode.saved_decode_step.available():
        pytest.skip("this torch saves no compiled functions")
    from bringup.core.engine import saved_decode_step

    monkeypatch.setattr(saved_decode_step, "step_key", lambda *a: "k")
    fresh_saved_steps.mkdir(parents=True)
    (fresh_saved_steps / "k.bin").write_bytes(b"not a saved step")
    torch._dynamo.reset()
    lines = []
    engine = _engine(tiny_folder, True, lines.append)
    assert any("saved step unreadable (" in line and "saved to" in line for line in lines), lines
    assert (fresh_saved_steps / "k.bin").read_bytes() != b"not a saved step"
    prompts, params = _workload(engine)
    assert engine.generate(prompts[:2], params[:2]) == _engine(tiny_folder, False).generate(prompts[:2], params[:2])


def test_the_saved_steps_key_follows_the_model_the_pools_and_the_switches(tiny_folder, monkeypatch):
    from bringup.core.engine.saved_decode_step import step_key

    engine = _engine(tiny_folder, False)
    model, kv, state = engine.model, engine.kv_pool, engine.state_pool
    key = step_key(model, kv, state)
    assert step_key(model, kv, state) == key
    monkeypatch.setattr(onednn_packed, "ENABLED", not onednn_packed.ENABLED)
    assert step_key(model, kv, state) != key
    monkeypatch.undo()
    monkeypatch.setenv("BRINGUP_SOMETHING", "1")
    assert step_key(model, kv, state) != key
    monkeypatch.delenv("BRINGUP_SOMETHING")
    other = _engine(tiny_folder, False)  # same model, same pools: the same key
    assert step_key(other.model, other.kv_pool, other.state_pool) == key
    monkeypatch.setattr(kv, "_k", [t[:-1] for t in kv._k])  # a pool of another size
    assert step_key(model, kv, state) != key


def test_a_failed_compile_leaves_eager_decode_steps(tiny_folder, monkeypatch):
    from bringup.core.engine import cpu_compiled_decode

    def no_compiler(self, *args, **kwargs):
        raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found")

    monkeypatch.setattr(cpu_compiled_decode.CompiledDecode, "warm_up", no_compiler)
    lines = []
    engine = _engine(tiny_folder, True, lines.append)
    assert engine.runner.compiled_decode is None
    assert any("compiling the decode step failed (RuntimeError: InvalidCxxCompiler" in line
               and "decode steps run eagerly" in line for line in lines)
    prompts, params = _workload(engine)
    assert [len(t) for t in engine.generate(prompts[:2], params[:2])] == [9, 4]


def test_the_compile_is_on_by_default_on_the_cpu_and_the_env_turns_it_off(monkeypatch):
    from bringup.core.engine.engine import Engine

    probe = Engine.__new__(Engine)
    probe.device = torch.device("cpu")
    monkeypatch.delenv("BRINGUP_CPU_COMPILE", raising=False)
    assert probe._cpu_compile_wanted(None) is True
    monkeypatch.setenv("BRINGUP_CPU_COMPILE", "0")
    assert probe._cpu_compile_wanted(None) is False and probe._cpu_compile_wanted(True) is True


def test_a_batch_torch_cannot_compile_runs_eagerly_and_the_rest_too(tiny_folder):
    lines = []
    engine = _engine(tiny_folder, False, lines.append)
    calls = []

    class CannotTrace:
        takes = staticmethod(CompiledDecode.takes)  # decode batches only

        def __call__(self, batch):
            calls.append(batch.num_requests)
            raise torch._dynamo.exc.TorchDynamoException("Unsupported: data-dependent branch\n  (pages of trace)")

    engine.runner.compiled_decode = CannotTrace()
    prompts, params = _workload(engine)
    got = engine.generate(prompts[:3], params[:3])
    assert calls == [3] and engine.runner.compiled_decode is None  # tried once, then eager for good
    assert any("failed on a batch of 3 (TorchDynamoException: Unsupported: data-dependent branch)" in line
               and "eagerly from now on" in line for line in lines)
    assert got == _engine(tiny_folder, False).generate(prompts[:3], params[:3])


def test_the_cli_choice_names_the_engine_setting_and_refuses_others():
    import argparse

    from bringup.core.cli import bench as bench_cli
    from bringup.core.cli import serve as serve_cli
    from bringup.core.engine import facts
    from bringup.core.errors import UserError

    assert [facts.cpu_compile_choice(v) for v in ("auto", "ON", " off ")] == [None, True, False]
    with pytest.raises(UserError, match="--cpu-compile 'maybe' is not a choice; use auto, on or off"):
        facts.cpu_compile_choice("maybe")
    for configure in (bench_cli.configure, serve_cli.configure):  # both commands take it
        parser = argparse.ArgumentParser()
        configure(parser)
        assert parser.parse_args(["default", "--cpu-compile", "off"]).cpu_compile == "off"
        assert parser.parse_args(["default"]).cpu_compile == "auto"
