"""Where one decode step's time goes: its kernels under torch.profiler, by kernel and by module.

bench/families.py --profile calls `profile_decode_step` per model and batch size. What is profiled
is the EAGER step (the decode graphs set aside for it): kernels launched from a graph replay are not
tied to the ops and modules that made them, and the profiler may not see them at all. Beside it, where
the bucket was captured, the graph is replayed alone under the profiler (CUPTI reports the kernels a
graph runs on recent drivers; the count says whether it did here) and timed with events, so a step's
time splits into: kernel time (the sum of the eager step's kernels), the gaps inside the graph
(graph replay - kernel time), and the host's share of a graphed step (the step the bench timed -
graph replay).

Each module's forward runs inside a `record_function("mod:<name>")` while profiling, so every kernel
is charged to the innermost module it was launched under (layer indices folded: layers.*.mlp).
A module's bytes are its weights (its own parameters and those of children that run no forward of
their own), routed experts and embeddings left out (a step reads only some of their rows): where
they are known, bytes over kernel time is the module's achieved bandwidth.

On a CPU (bench/families.py --cpu-smoke) the same code runs with CPU activity only: the "kernels"
are the leaf aten ops (figures meaningless; it checks the script).
"""

from __future__ import annotations

import collections
import re
import time
from contextlib import contextmanager

import torch
from torch import nn

MODULE_TAG = "mod:"


def short_name(name: str, width: int = 46) -> str:
    """A kernel's name without 'void', namespaces and the argument list, cut to `width`."""
    name = re.sub(r"^void ", "", name)
    name = name.split("(", 1)[0] if not name.startswith("(") else name
    name = re.sub(r"(at::native::|at::|cutlass::|\(anonymous namespace\)::|std::)", "", name)
    return name if len(name) <= width else name[: width - 1] + "~"


def module_pattern(name: str) -> str:
    """'model.layers.12.self_attn.o_proj' -> 'layers.*.self_attn.o_proj'; '' (the model) -> '(model)'."""
    folded = re.sub(r"\.\d+(?=\.|$)", ".*", name)
    return re.sub(r"^(model|backbone|transformer)\.", "", folded) or "(model)"


@contextmanager
def labelled_modules(model: nn.Module):
    """Every module's forward inside record_function('mod:<qualified name>') while inside."""
    handles, open_ranges = [], collections.defaultdict(list)
    for name, module in model.named_modules():
        label = MODULE_TAG + name  # the root: "mod:" alone

        def enter(mod, args, label=label):
            rf = torch.profiler.record_function(label)
            rf.__enter__()
            open_ranges[id(mod)].append(rf)

        def leave(mod, args, out):
            if open_ranges[id(mod)]:
                open_ranges[id(mod)].pop().__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave, always_call=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _module_of(event) -> str | None:
    """The innermost 'mod:' range holding a profiler event (itself included), without the tag ("" is
    the model itself); None outside the model (the batch's upload, sampling)."""
    while event is not None:
        if event.name.startswith(MODULE_TAG):
            return event.name[len(MODULE_TAG):]
        event = event.cpu_parent
    return None


def _charged_kernels(prof, on_gpu: bool) -> list[tuple[str, float, str | None]]:
    """(kernel name, us, qualified module or None) for each kernel the profile linked to a host op
    (on a CPU: each leaf aten op)."""
    out = []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CPU:
            continue
        if on_gpu:
            for k in getattr(e, "kernels", ()):
                if "memcpy" not in k.name.lower() and "memset" not in k.name.lower():
                    out.append((k.name, float(k.duration), _module_of(e)))
        elif e.name.startswith("aten::") and not e.cpu_children:
            out.append((e.name, float(e.self_cpu_time_total), _module_of(e)))
    return out


def _device_kernels(prof) -> list[tuple[str, float]]:
    """(name, us) of each device kernel, memcpy and memset aside (as bench/nano_full.profile_decode
    counts), and the device-side spans of the module labels too."""
    return [(e.name, float(e.device_time_total)) for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA and not e.is_user_annotation
            and not e.name.startswith(MODULE_TAG) and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]


def _where(module: str | None) -> str:
    return module_pattern(module) if module is not None else "(outside the model)"


def module_bytes(model: nn.Module, seen: set[str]) -> dict[str, int | None]:
    """Bytes of weights each seen module reads per step (see the docstring); None where the module
    holds routed experts (3-D weights) or is an embedding."""
    names = dict(model.named_modules())
    out: dict[str, int | None] = {}
    for name, module in names.items():
        owner = name
        while owner not in seen and owner:
            owner = owner.rsplit(".", 1)[0] if "." in owner else ""
        if owner not in seen:
            continue
        if out.get(owner, 0) is None:
            continue
        if isinstance(module, nn.Embedding) or any(p.dim() >= 3 for p in module._parameters.values() if p is not None):
            out[owner] = None
            continue
        own = sum(p.numel() * p.element_size() for p in module._parameters.values() if p is not None)
        out[owner] = out.get(owner, 0) + own
    return out


def _steady(engine, batch: int, steps: int) -> None:
    """`batch` requests of a 16-token prompt, stepped until every one decodes (enough tokens left for
    the warm step and `steps` profiled ones)."""
    from bringup.core.engine.sampling import SamplingParams

    params = SamplingParams(max_new_tokens=steps + 8, temperature=0.0, ignore_eos=True)
    for i in range(batch):
        engine.add_request([5 + i % 7] * 16, params, detokenize=False)
    sch = engine.scheduler
    while sch.waiting or any(r.num_computed < len(r.prompt_ids) for r in sch.running):
        engine.step()


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _graph_replay(engine, bucket: int, replays: int = 5) -> dict | None:
    """The captured graph of `bucket` replayed alone: GPU ms per replay (events) and the kernels the
    profiler saw inside it (0 where it sees none)."""
    from torch.profiler import ProfilerActivity, profile

    graphs = engine.runner.decode_graphs
    if graphs is None or bucket not in getattr(graphs, "_graphs", {}):
        return None
    from nano_full import graph_replay_ms

    replay_ms = graph_replay_ms(engine, bucket)
    graph = graphs._graphs[bucket][0]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    seen = _device_kernels(prof)
    return {"replay_ms": replay_ms, "kernels": len(seen) / replays, "kernel_ms": sum(us for _, us in seen) / replays / 1e3}


def profile_decode_step(engine, batch: int, steps: int = 3) -> dict:
    """Profile `steps` eager decode steps of `batch` requests (see the module docstring). Returns
    {wall_ms, kernel_ms, kernels, kernels_by_name: [(name, per step, us per step, top module)],
    modules: [(pattern, kernels per step, us per step, bytes per step or None)], graph: {...} or None,
    charged_share}: every figure per step."""
    from torch.profiler import ProfilerActivity, profile

    device = engine.device
    on_gpu = device.type == "cuda"
    runner = engine.runner
    _steady(engine, batch, steps)
    saved = runner.decode_graphs, runner.compiled_decode
    runner.decode_graphs = runner.compiled_decode = None
    try:
        engine.step()  # the eager step's own shapes warm
        _sync(device)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
        with labelled_modules(engine.model), profile(activities=activities) as prof:
            t = time.perf_counter()
            for _ in range(steps):
                engine.step()
            _sync(device)
            wall = time.perf_counter() - t
    finally:
        runner.decode_graphs, runner.compiled_decode = saved
    charged = _charged_kernels(prof, on_gpu)
    flat = _device_kernels(prof) if on_gpu else [(n, us) for n, us, _ in charged]
    total_us = sum(us for _, us in flat)
    by_name: dict[str, list] = {}
    for name, us in flat:
        row = by_name.setdefault(name, [0, 0.0, collections.Counter()])
        row[0] += 1
        row[1] += us
    for name, us, module in charged:
        if name in by_name:
            by_name[name][2][_where(module)] += us
    kernels = sorted(((name, n / steps, us / steps, (c.most_common(1)[0][0] if c else "?"))
                      for name, (n, us, c) in by_name.items()), key=lambda r: -r[2])
    seen = {m for _, _, m in charged if m is not None}
    seen.add("")  # the model owns what no labelled module does
    weights = module_bytes(engine.model, seen)
    modules: dict[str, list] = {}
    for name, us, module in charged:
        row = modules.setdefault(_where(module), [0, 0.0, 0, set()])
        row[0] += 1
        row[1] += us
        if module not in row[3]:  # each instance's weights once per step
            row[3].add(module)
            b = weights.get(module)
            row[2] = None if b is None or row[2] is None else row[2] + b
    mods = sorted(((p, n / steps, us / steps, b) for p, (n, us, b, _) in modules.items()), key=lambda r: -r[2])
    while engine.has_unfinished():
        engine.step()
    graph = _graph_replay(engine, batch) if on_gpu else None
    charged_us = sum(us for _, us, _ in charged)
    return {"batch": batch, "device": device.type, "wall_ms": wall / steps * 1e3, "kernel_ms": total_us / steps / 1e3,
            "kernels": len(flat) / steps, "kernels_by_name": kernels, "modules": mods, "graph": graph,
            "charged_share": charged_us / total_us if total_us else float("nan")}


def describe(result: dict, graphed_ms: float | None, top: int = 10, top_modules: int = 6) -> str:
    """The profile as a few lines: the split of the step's time, the top kernels, the top modules
    (%GPU: of the eager step's kernel time)."""
    r, what = result, ("CUDA kernels" if result["device"] == "cuda" else "CPU leaf aten ops")
    kern = r["kernel_ms"]
    lines = [f"  profile b{r['batch']} (eager step, graphs set aside; {what}): {r['kernels']:.0f} per step, "
             f"sum {kern:.3f} ms of {r['wall_ms']:.3f} ms wall ({kern / r['wall_ms']:.0%}; the rest is launch "
             f"and host); {r['charged_share']:.0%} of it charged to modules"]
    g = r.get("graph")
    if g is not None:
        lines.append(f"  graph b{r['batch']} replayed alone: {g['replay_ms']:.3f} ms (gaps in it "
                     f"{g['replay_ms'] - kern:+.3f} ms over the eager kernel sum); profiler saw {g['kernels']:.0f} "
                     f"kernels in it, sum {g['kernel_ms']:.3f} ms"
                     + (f"; graphed step timed {graphed_ms:.3f} ms (host {graphed_ms - g['replay_ms']:+.3f} ms)"
                        if graphed_ms else ""))
    lines.append(f"    {'us/step':>8} {'%GPU':>5} {'n/step':>6}  {'kernel':<46} from")
    for name, n, us, module in r["kernels_by_name"][:top]:
        lines.append(f"    {us:8.1f} {us / 1e3 / kern if kern else 0:5.0%} {n:6.1f}  {short_name(name):<46} {module}")
    lines.append(f"    {'us/step':>8} {'%GPU':>5} {'n/step':>6}  {'MB/step':>8} {'GB/s':>6}  module")
    for pattern, n, us, b in r["modules"][:top_modules]:
        bw = f"{b / us / 1e3:6.0f}" if b and us and b >= 2**20 else f"{'-':>6}"
        mb = f"{b / 1e6:8.1f}" if b is not None else f"{'-':>8}"
        lines.append(f"    {us:8.1f} {us / 1e3 / kern if kern else 0:5.0%} {n:6.1f}  {mb} {bw}  {pattern}")
    return "\n".join(lines)
