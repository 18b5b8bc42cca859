"""The gated MoE's decode form chosen by timing (kernels/triton/moe_gated_forms.py), under Triton's
interpreter with an injected clock (a CPU cannot time the forms as a GPU runs them): every form that
can run a bucket is really launched once per bucket, the one the clock calls fastest runs every later
call of a token count in that bucket with the right answer; the estimate runs above the largest
bucket, with timing off, and where the device cannot be timed; the log names each bucket's form."""

from __future__ import annotations

from triton_interpreter import assert_interpreted_ok

_PICKING = """
import torch
from bringup.kernels.reference.moe_gated_experts import moe_gated_experts_unsummed as ref_parts
from bringup.kernels.triton import fused_moe_gated as fast
from bringup.kernels.triton.moe_gated_forms import DecodeForms
from bringup.kernels.triton.tile_picker import TilePicker
torch.manual_seed(0)
E, H, I, k = 6, 40, 36, 2
gate_up = torch.randn(E, H, 2 * I) / H ** 0.5
gub, down, db = torch.randn(E, 2 * I) * 0.1, torch.randn(E, I, H) / I ** 0.5, torch.randn(E, H) * 0.1
g, u, d = gate_up[..., ::2].transpose(1, 2), gate_up[..., 1::2].transpose(1, 2), down.transpose(1, 2)
args = ("swiglu_clamped", gub[:, ::2], gub[:, 1::2], db, 1.702, 7.0)

ran = []  # every form run, in order (timed runs and real ones)
real_run_form = fast._run_form
def recording(form, *a):
    ran.append(form)
    return real_run_form(form, *a)
fast._run_form = recording
# the injected clock: us per call by (bucket, form); the fastest: grouped at 1, sorted at 4, split at 8
COST = {1: {"gemv": 9, "split": 5, "grouped": 3, "sorted": 4}, 4: {"gemv": 9, "split": 5, "grouped": 6, "sorted": 4},
        8: {"split": 2, "grouped": 6, "sorted": 4}}
bucket_now = []
def clock(device, call):
    before = len(ran)
    call()
    (form,) = ran[before:]  # one form per timed call
    return COST[bucket_now[-1]][form]

def run(T, bucket=None):
    bucket_now.append(bucket)
    x = torch.randn(T, H)
    top, ids = torch.randn(T, E).topk(k, -1)
    w = torch.softmax(top, -1)
    del ran[:]
    got = fast.moe_gated_experts_unsummed(x, w, ids, g, u, d, *args)
    torch.testing.assert_close(got, ref_parts(x, w, ids, g, u, d, *args), rtol=1e-4, atol=1e-5)
    return list(ran)

forms = fast.DECODE_FORMS = DecodeForms(TilePicker("test", timer=clock))
forms.measure = True
forms.measure_at([8, 1, 4])
# bucket 1: each candidate (the estimate, split, first) timed once, then the real call in grouped
assert run(1, 1) == ["split", "gemv", "grouped", "sorted", "grouped"], ran
assert run(1, 1) == ["grouped"]  # kept, not timed again
# bucket 4 timed at 3 tokens (the first call in (1, 4]); 4 tokens then take its choice untimed
assert run(3, 4) == ["split", "gemv", "grouped", "sorted", "sorted"], ran
assert run(4, 4) == ["sorted"] and run(2, 4) == ["sorted"]
# bucket 8: no GEMV past its 4 tokens; the estimate (grouped at 8 tokens) first
assert run(6, 8) == ["grouped", "split", "sorted", "split"], ran
# above the largest bucket: the estimate, untimed
assert run(9) == [fast.decode_form(9, k, E)]
lines = forms.describe()
assert len(lines) == 1 and "6 experts, top 2, 40 -> 36 -> 40, swiglu_clamped, biases, float32, interleaved" in lines[0]
assert "1 grouped 3 us (estimate split 5 us), 4 sorted 4 us (estimate split 5 us), 8 split 2 us (estimate grouped 6 us)" \\
    in lines[0], lines
# timing off: the estimate at every size
fast.DECODE_FORMS = off = DecodeForms(TilePicker("off", timer=clock))
off.measure = False
off.measure_at([1, 4, 8])
assert run(1) == ["split"] and run(6) == ["grouped"] and off.picker.timings == {}
# a device that cannot be timed (the CPU without a clock): the estimate, nothing timed
fast.DECODE_FORMS = cpu = DecodeForms(TilePicker("cpu"))
cpu.measure_at([1, 4, 8])
assert run(1) == ["split"] and run(6) == ["grouped"] and cpu.picker.chosen == {} and cpu.describe() == []
print("ok")
"""


def test_the_fastest_form_per_bucket_runs_and_the_estimate_elsewhere_interpreted():
    assert_interpreted_ok(_PICKING, timeout=600)


_ENGINE = """
import json, pathlib, sys, tempfile, time
sys.path[:0] = sys.argv[1].split(",")  # the engine tests' graph stand-in and their helpers
from bringup.core.bench.launch_count import gpu_weight_layout, small_widths, use_gpu_ops_on_cpu
use_gpu_ops_on_cpu()
from bringup.kernels.triton import fused_moe_gated as fast
from bringup.kernels.triton.moe_gated_forms import DecodeForms
from bringup.kernels.triton.tile_picker import TilePicker
def wall_clock(device, call):  # a real clock: which form wins on the interpreter is no concern here
    t = time.perf_counter()
    call()
    return (time.perf_counter() - t) * 1e6
fast.DECODE_FORMS = DecodeForms(TilePicker("wall clock", timer=wall_clock))
fast.DECODE_FORMS.measure = True
from bringup.core.engine.config import EngineConfig
from bringup.core.engine.engine import Engine
from bringup.core.engine.sampling import SamplingParams
from test_engine_decode_graphs import ReplayStandIn
config = small_widths(json.loads(pathlib.Path(sys.argv[2]).read_text()))
config.update(num_hidden_layers=1, layer_types=config["layer_types"][:1])
path = pathlib.Path(tempfile.mkdtemp()) / "config.json"
path.write_text(json.dumps(config))
logs = []
with gpu_weight_layout():
    engine = Engine(EngineConfig(str(path), device="cpu", dtype="bfloat16", load_format="dummy", max_running_requests=3,
                                 context_length=64, cpu_compile=False, warmup=False, cuda_graphs=True),
                    log=logs.append, graph_factory=ReplayStandIn)
(line,) = [l for l in logs if l.startswith("Gated MoE decode form by batch size")]
cells = line.split("random routing): ")[1].split(", ")
assert [c.split()[0] for c in cells] == ["1", "2", "3"], line  # each captured batch size, timed in its warm-up
assert all(c.split()[1] in fast.FORMS for c in cells), line
out = engine.generate([[5] * 6, [7] * 9, [3] * 4], SamplingParams(max_new_tokens=3, temperature=0, ignore_eos=True))
assert [len(o) for o in out] == [3, 3, 3]
print("ok")
"""


def test_the_engine_times_the_forms_per_captured_batch_size_and_logs_them_interpreted():
    """A one-layer gpt-oss at small widths on the CPU with the GPU op set, decode graphs through a stand-in
    that re-runs the captured call: the capture names its batch sizes, and the start-up log each one's form."""
    from repo_paths import SHARED_MODELS, TESTS

    paths = f"{TESTS / 'core' / 'engine'},{TESTS / 'helpers'}"
    assert_interpreted_ok(_ENGINE, paths, str(SHARED_MODELS / "openai__gpt-oss-20b.json"), timeout=600)
