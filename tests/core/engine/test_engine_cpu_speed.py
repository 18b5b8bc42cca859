"""The CPU engine's speed settings: torch's thread count, linear weights stored transposed, and the
float32 shortcut of the reference RMSNorm. Each keeps the answer the same (speed itself is measured
by `bringup bench`, never here)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bringup.kernels.reference as ref
from bringup.core.engine import cpu_threads
from bringup.core.engine.cpu_linears import prepare_linears_for_cpu
from bringup.core.errors import UserError


def test_busy_cores_come_from_the_cpu_time_the_machine_ran(monkeypatch):
    # 2 cores; over the sample, 150 of 400 jiffies ran (iowait counts as idle): 0.75 of 2 cores busy.
    samples = iter([(1000, 4000), (1150, 4400)])
    monkeypatch.setattr(cpu_threads, "_cpu_times", lambda: next(samples))
    monkeypatch.setattr(cpu_threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpu_threads, "load_average", lambda: 9.0)  # not asked while /proc/stat answers
    busy, how = cpu_threads.busy_cores(0.0)
    assert busy == pytest.approx(0.75) and how == "0.75 busy over 0.0 s"
    assert cpu_threads.idle_cores(2, busy) == 1


@pytest.mark.parametrize("cores, load, idle", [(2, None, 2), (2, 0.1, 2), (2, 0.6, 1), (2, 5.0, 1), (8, 2.4, 6),
                                               (8, 0.0, 8), (1, 0.0, 1)])
def test_idle_cores_leave_the_loaded_ones_out(cores, load, idle):
    assert cpu_threads.idle_cores(cores, load) == idle


def test_requested_threads_win_and_zero_is_refused(monkeypatch):
    monkeypatch.setattr(cpu_threads, "_cpu_times", lambda: None)  # no /proc/stat: the load average tells
    monkeypatch.setattr(cpu_threads, "load_average", lambda: 9.0)
    assert cpu_threads.choose_cpu_threads(3) == (3, "as requested")
    threads, why = cpu_threads.choose_cpu_threads(None)
    assert threads == 1 and "load average 9.00" in why
    with pytest.raises(UserError, match="--cpu-threads 0 must be at least 1"):
        cpu_threads.choose_cpu_threads(0)


class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 6)
        self.proj = nn.Linear(6, 5, bias=True)
        self.head = nn.Linear(6, 11, bias=False)
        self.head.weight = self.embed.weight  # tied: a lookup reads rows, so it keeps them
        self.experts = nn.Module()
        self.experts.up_proj = nn.Parameter(torch.randn(3, 4, 6), requires_grad=False)


def test_transposed_storage_keeps_values_shapes_and_products():
    torch.manual_seed(0)
    model = _Tiny().requires_grad_(False)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    x = torch.randn(7, 6)
    y_before = F.linear(x, model.proj.weight, model.proj.bias), F.linear(x, model.experts.up_proj[1])
    assert prepare_linears_for_cpu(model) == 2  # proj and the expert stack; the tied head is left
    for n, p in model.named_parameters():
        assert p.shape == before[n].shape and torch.equal(p, before[n]), n
    assert model.proj.weight.stride() == (1, 5) and model.experts.up_proj.stride() == (24, 1, 4)
    assert model.embed.weight.is_contiguous() and model.head.weight is model.embed.weight
    y_after = F.linear(x, model.proj.weight, model.proj.bias), F.linear(x, model.experts.up_proj[1])
    for a, b in zip(y_before, y_after):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("multiply_in_float32", [False, True])
def test_float32_rms_norm_shortcut_is_the_written_formula_bit_for_bit(multiply_in_float32):
    torch.manual_seed(1)
    for shape in ((1, 16), (8, 256), (3, 5, 100)):
        x, w = torch.randn(shape) * 3, torch.randn(shape[-1])
        formula = w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))
        assert torch.equal(ref.rms_norm(x, w, 1e-5, multiply_in_float32=multiply_in_float32), formula)


@pytest.mark.slow
def test_cpu_engine_sets_its_threads_and_transposes_its_linears(tmp_path):
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.sampling import SamplingParams

    from engine_helpers import hf_greedy, prompts_of_lengths, tiny_nemotron_h

    folder = tiny_nemotron_h(tmp_path)
    before = torch.get_num_threads()
    lines = []
    try:
        engine = Engine(EngineConfig(str(folder), device="cpu", cpu_threads=1), log=lines.append)
        assert torch.get_num_threads() == 1 and engine.server_info()["cpu_threads"] == 1
        assert "CPU threads: 1 (as requested)" in lines
        mixer = next(layer.mixer_module for layer in engine.model.decoder.layers if layer.mixer_kind == "mamba2")
        assert not mixer.in_proj.weight.is_contiguous() and mixer.in_proj.weight.t().is_contiguous()
        prompts = prompts_of_lengths([5, 17], 400, seed=2)
        greedy = SamplingParams(max_new_tokens=4, temperature=0, ignore_eos=True)
        assert engine.generate(prompts, greedy) == hf_greedy(folder, prompts, 4)
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_packed_weight_copies_are_counted_and_left_out_when_memory_is_short(tmp_path, monkeypatch):
    from bringup.core.engine import device as devices
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.sampling import SamplingParams
    from bringup.kernels.cpu import onednn_packed

    from engine_helpers import tiny_nemotron_h

    if not onednn_packed.USABLE:
        pytest.skip("this torch build has no oneDNN")
    monkeypatch.setattr(onednn_packed, "ENABLED", True)  # restored after the test, whatever the engines set
    folder = tiny_nemotron_h(tmp_path)
    lines = []
    engine = Engine(EngineConfig(str(folder), device="cpu", cpu_threads=1), log=lines.append)
    packed = engine.server_info()["allocated"]["packed_weights_bytes"]
    assert 0 < packed < engine.weights_bytes and any("oneDNN packed copies" in line for line in lines)
    greedy = SamplingParams(max_new_tokens=3, temperature=0, ignore_eos=True)
    engine.generate([[5, 6, 7, 8]] * 4, greedy)  # four rows: the MoE's dense form packs its stacks too
    assert engine.server_info()["allocated"]["packed_weights_bytes"] > packed

    # With memory for the weights but not for them twice over (in half of it), no copies are made.
    weights = engine.weights_bytes
    monkeypatch.setattr(devices, "free_memory", lambda device: int(3.9 * weights))
    lines.clear()
    short = Engine(EngineConfig(str(folder), device="cpu", cpu_threads=1, context_length=128), log=lines.append)
    assert not onednn_packed.ENABLED and short.server_info()["allocated"]["packed_weights_bytes"] == 0
    assert any("no oneDNN packed weight copies" in line for line in lines)
    assert short.generate([[5, 6, 7, 8]] * 4, greedy) == engine.generate([[5, 6, 7, 8]] * 4, greedy)


def test_a_server_leaves_a_core_to_its_event_loop(monkeypatch):
    """`bringup serve` reserves one core for its HTTP thread (a thread team with every core stalls on its turns)."""
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: 4)
    monkeypatch.setattr(cpu_threads, "busy_cores", lambda: (1.0, "1.00 busy over 0.1 s"))
    assert cpu_threads.choose_cpu_threads(None) == (3, "4 usable cores, 1.00 busy over 0.1 s: 3 idle")
    threads, why = cpu_threads.choose_cpu_threads(None, reserved=1)
    assert threads == 2 and why.endswith("1 left to the server's event loop")
    monkeypatch.setattr(cpu_threads, "busy_cores", lambda: (3.0, "3.00 busy over 0.1 s"))
    assert cpu_threads.choose_cpu_threads(None, reserved=1)[0] == 1  # never fewer than one
    assert cpu_threads.choose_cpu_threads(2, reserved=1) == (2, "as requested")  # --cpu-threads wins


@pytest.mark.parametrize("cores, busy, threads", [(2, 0.0, 2), (3, 0.0, 2), (4, 0.0, 3), (4, 2.0, 2), (2, 1.0, 1)])
def test_the_event_loops_core_is_reserved_whenever_the_engine_keeps_two_threads(monkeypatch, cores, busy, threads):
    """On 2 idle cores a served engine takes both (measured: 230-253 served tok/s against 192-201 with
    one); from 3 idle cores one is left to the event loop; with 1 idle core the engine keeps it."""
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: cores)
    monkeypatch.setattr(cpu_threads, "busy_cores", lambda: (busy, f"{busy:.2f} busy over 0.1 s"))
    got, why = cpu_threads.choose_cpu_threads(None, reserved=1)
    idle = cpu_threads.idle_cores(cores, busy)
    assert got == threads
    if threads < idle:
        assert why.endswith(f"{idle - threads} left to the server's event loop")
    elif idle > 1:
        assert why.endswith("none left to the server's event loop (that would leave the engine fewer than 2 threads)")
