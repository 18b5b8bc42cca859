"""A regression guard for GPU syncs that runs on the CPU: count, during one forward pass of the tiny
52-block NemotronH, every call that reads a device tensor back to the host or makes a new tensor
from host data (each one waits for the device to drain on a GPU). A decode-only step must make
none; the GPU choices of the kernels (e.g. the MoE form) are forced on for the count.
Also: those GPU choices give the CPU's logits, and the pools end in the same state."""

from __future__ import annotations

import importlib
from collections import Counter
from contextlib import contextmanager

import pytest
import torch

from bringup.core.sources.default_model import TINY_TEST_SPEC, build_checkpoint
from bringup.core.engine.forward_batch import ForwardBatch
from bringup.core.engine.loader import load_model
from bringup.core.engine.pools import KVPool, StatePool

# the module (the package exports its function under the same name)
moe_module = importlib.import_module("bringup.kernels.reference.moe_experts")

# Tensor methods that hand a device value to Python (a sync on a GPU) and constructors that copy host
# data to the device (a sync too, unless pinned and asynchronous, which `upload` does once per batch).
READS = ("tolist", "item", "cpu", "numpy", "nonzero", "__bool__", "__int__", "__float__")
CONSTRUCTORS = ("tensor", "as_tensor")

BATCH, PROMPT, PAGE = 4, 6, 4


@contextmanager
def host_sync_counter():
    counts: Counter = Counter()
    mp = pytest.MonkeyPatch()

    def counting(owner, name, label):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            counts[label] += 1
            return original(*args, **kwargs)

        mp.setattr(owner, name, wrapper)

    for name in READS:
        counting(torch.Tensor, name, f"Tensor.{name}")
    for name in CONSTRUCTORS + ("nonzero",):
        counting(torch, name, f"torch.{name}")
    try:
        yield counts
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def model_and_pools(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_nemotron")
    build_checkpoint(folder, TINY_TEST_SPEC)  # Nemotron-3-Nano's 52-block pattern at tiny width
    with pytest.MonkeyPatch.context() as mp:
        # The references, which GPUs run where they have no fast op: the CPU's own ops
        # (kernels/cpu) read slots and expert counts on the host, which costs nothing there.
        mp.setenv("BRINGUP_KERNELS", "reference")
        model = load_model(str(folder), device="cpu", dtype="float32").model
    spec = model.cache_spec
    assert len(model.backbone.layers) == 52 and spec.kv_layer_ids and spec.state_layer_ids
    kv = KVPool(BATCH * 4, PAGE, spec.kv_layer_ids, spec.num_kv_heads, spec.head_dim, torch.float32, "cpu")
    st = StatePool(BATCH, spec.state_layer_ids, spec.conv_shape, spec.ssm_shape, torch.float32, torch.float32, "cpu")
    slots = [st.alloc() for _ in range(BATCH)]
    tables = [kv.alloc(4) for _ in range(BATCH)]

    def batch(chunks, prefix):
        return ForwardBatch.build(token_chunks=chunks, prefix_lens=prefix, block_tables=tables, page_size=PAGE,
                                  state_slots=slots, kv_pool=kv, state_pool=st)

    prompts = [[5 + i + j for j in range(PROMPT)] for i in range(BATCH)]
    with torch.no_grad():
        model(batch(prompts, [0] * BATCH))
    return model, kv, st, batch


@pytest.fixture
def gpu_choices(monkeypatch):
    """Kernels choose as on a GPU, where a host read is a sync."""
    monkeypatch.setattr(moe_module, "HOST_READS_FREE", set())


def _pool_tensors(kv, st):
    tensors = [kv.k(i) for i in kv.layer_ids] + [kv.v(i) for i in kv.layer_ids]
    return tensors + [st.conv(i) for i in st.layer_ids] + [st.ssm(i) for i in st.layer_ids]


def _restore(kv, st, saved):
    for t, s in zip(_pool_tensors(kv, st), saved):
        t.copy_(s)


def test_decode_step_makes_no_host_reads_or_copies(model_and_pools, gpu_choices):
    model, kv, st, batch = model_and_pools
    decode = batch([[7]] * BATCH, [PROMPT] * BATCH)
    assert decode.is_decode_only
    with host_sync_counter() as counts, torch.no_grad():
        logits = model(decode)
    assert logits.shape == (BATCH, model.config.vocab_size)
    assert dict(counts) == {}, f"a decode step read the device or copied host data: {dict(counts)}"


def test_building_a_batch_reads_nothing_back(model_and_pools):
    _, _, _, batch = model_and_pools
    with host_sync_counter() as counts:
        batch([[7], [8, 9], [3], [4]], [PROMPT, PROMPT, PROMPT, PROMPT])
    reads = {k: v for k, v in counts.items() if k.startswith("Tensor.")}
    assert reads == {}
    # one upload of all device metadata, plus the two host-side length tensors
    assert counts["torch.tensor"] == 3


def test_mixed_step_host_reads_do_not_grow_with_layers(model_and_pools, gpu_choices):
    """A step with a prompt chunk in it may read a little (the varlen scan plans its chunks on the
    host), but its metadata goes to the device once per step, not once per layer."""
    model, kv, st, batch = model_and_pools
    saved = [p.clone() for p in _pool_tensors(kv, st)]
    mixed = batch([[7], [1, 2, 3], [7], [7]], [PROMPT, PROMPT, PROMPT, PROMPT])
    with host_sync_counter() as counts, torch.no_grad():
        model(mixed)
    _restore(kv, st, saved)
    # Once per step: the upload, and the varlen helpers' index tensors on a cache miss (10 when cold).
    # Anything per layer adds at least 6 (the attention layers) or 23 (the Mamba or MoE layers).
    assert sum(counts.values()) <= 12, dict(counts)


def test_gpu_choices_give_the_cpu_logits_and_pool_state(model_and_pools, monkeypatch):
    model, kv, st, batch = model_and_pools
    saved = [p.clone() for p in _pool_tensors(kv, st)]
    results = {}
    for name, free in (("cpu", {"cpu"}), ("gpu", set())):
        monkeypatch.setattr(moe_module, "HOST_READS_FREE", free)
        _restore(kv, st, saved)
        with torch.no_grad():
            decode = model(batch([[7], [11], [13], [17]], [PROMPT] * BATCH))
            mixed = model(batch([[3], [1, 2], [5], [9]], [PROMPT + 1] * BATCH))
        results[name] = (decode, mixed, [p.clone() for p in _pool_tensors(kv, st)])
    _restore(kv, st, saved)
    (d_cpu, m_cpu, s_cpu), (d_gpu, m_gpu, s_gpu) = results["cpu"], results["gpu"]
    torch.testing.assert_close(d_gpu, d_cpu, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(m_gpu, m_cpu, rtol=1e-5, atol=1e-5)
    for a, b in zip(s_gpu, s_cpu):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_sampling_sends_its_settings_in_one_copy():
    from bringup.core.engine.sampling import SamplingParams, make_generator, sample

    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(0))
    params = [SamplingParams(temperature=0.0), SamplingParams(temperature=0.7, top_k=5),
              SamplingParams(temperature=1.3, top_p=0.9, seed=3), SamplingParams(temperature=0.5, top_k=3, top_p=0.8)]
    gens = [make_generator(p.seed, "cpu") for p in params]
    with host_sync_counter() as counts:
        tokens = sample(logits, params, gens)
    assert tokens.shape == (4,) and int(tokens[0]) == int(logits[0].argmax())
    assert dict(counts) == {"torch.tensor": 1}


@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.float32])
def test_upload_views_start_on_16_byte_boundaries(dtype):
    """Triton compiles once per pointer alignment: views whose offsets followed the list lengths
    made a fresh compile whenever a step's counts changed parity."""
    from bringup.core.engine.forward_batch import upload

    values = [[1, 2, 3], [], [4], [5, 6, 7, 8, 9], [10, 11]]
    views = upload(values, torch.device("cpu"), dtype)
    assert [v.tolist() for v in views] == values  # 1.0 == 1: the float32 form compares too
    assert all(v.is_contiguous() and v.dtype == dtype and v.data_ptr() % 16 == 0 for v in views)
