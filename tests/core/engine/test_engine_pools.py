"""The engine's pools: layer maps, the PR #32227 error text, and integrity under random use."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.core.engine.pools import (
    KVPool, PoolExhaustedError, PoolIntegrityError, PoolLayerError, StatePool,
)

NANO_ATTENTION = [5, 12, 19, 26, 33, 42]


def small_kv(num_pages=8, layers=NANO_ATTENTION):
    return KVPool(num_pages, 4, layers, num_kv_heads=2, head_dim=8, dtype="float32", device="cpu")


def small_state(num_slots=4, layers=(0, 2, 4)):
    return StatePool(num_slots, layers, conv_shape=(12, 3), ssm_shape=(2, 4, 8), device="cpu")


def test_kv_pool_holds_only_its_layers_with_shapes():
    pool = small_kv()
    assert pool.k(12).shape == (8, 4, 2, 8)
    assert pool.v(42).shape == (8, 4, 2, 8)
    assert pool.pool_index(12) == 1
    assert pool.k(5).data_ptr() != pool.k(12).data_ptr()
    assert pool.get_v_head_dim() == 8


def test_each_layer_has_a_tensor_of_its_own():
    # Not views of one tensor for all layers: a compiled decode step writes a layer's cache in place
    # only when the layer's tensor is its own (core/engine/cpu_compiled_decode.py).
    kv, state = small_kv(), small_state()
    for tensors in ([kv.k(i) for i in NANO_ATTENTION] + [kv.v(i) for i in NANO_ATTENTION],
                    [state.conv(i) for i in (0, 2, 4)] + [state.ssm(i) for i in (0, 2, 4)]):
        storages = {t.untyped_storage().data_ptr() for t in tensors}
        assert len(storages) == len(tensors) and all(t.storage_offset() == 0 for t in tensors)


def test_kv_pool_layer_error_names_layer_and_held_layers():
    with pytest.raises(PoolLayerError) as err:
        small_kv().v(0)
    assert str(err.value) == "layer 0 is not in the KV pool; it holds layers [5, 12, 19, 26, 33, 42]"
    assert err.value.layer_id == 0 and err.value.layer_ids == NANO_ATTENTION


def test_state_pool_layer_error_and_shapes_and_dtypes():
    pool = small_state()
    assert pool.conv(2).shape == (4, 12, 3) and pool.conv(2).dtype == torch.bfloat16
    assert pool.ssm(4).shape == (4, 2, 4, 8) and pool.ssm(4).dtype == torch.float32  # fp32 by default
    with pytest.raises(PoolLayerError, match=r"layer 5 is not in the state pool; it holds layers \[0, 2, 4\]"):
        pool.ssm(5)
    half = StatePool(2, [0], (4, 3), (1, 2, 2), conv_dtype="float16", ssm_dtype="bfloat16")
    assert half.conv(0).dtype == torch.float16 and half.ssm(0).dtype == torch.bfloat16


def test_state_slot_is_zeroed_on_alloc():
    pool = small_state(num_slots=1)
    slot = pool.alloc("a")
    pool.ssm(2)[slot].fill_(3.0)
    pool.conv(0)[slot].fill_(1.0)
    pool.free(slot)
    again = pool.alloc("b")
    assert again == slot
    assert pool.ssm(2)[again].abs().sum() == 0 and pool.conv(0)[again].abs().sum() == 0


def test_sizes_and_counters():
    pool = small_kv(num_pages=10, layers=[1, 3])
    assert pool.k_bytes == 2 * 10 * 4 * 2 * 8 * 4
    assert pool.bytes_per_token == 2 * 2 * (8 + 8) * 4
    assert pool.capacity_tokens == 40 and pool.pages_for(9) == 3
    pages = pool.alloc(3, owner="r")
    assert (pool.num_used_pages, pool.num_free_pages) == (3, 7)
    pool.free(pages)
    assert pool.num_used_pages == 0


def test_exhaustion_double_free_and_leak_are_caught():
    pool = small_kv(num_pages=3)
    a = pool.alloc(2, owner="a")
    with pytest.raises(PoolExhaustedError, match="only 1 of 3 are free"):
        pool.alloc(2, owner="b")
    pool.free(a[:1])
    with pytest.raises(PoolIntegrityError, match="freed but it is not allocated"):
        pool.free(a[:1])
    with pytest.raises(PoolIntegrityError, match="leaked"):
        pool.check({})  # the pool still has a[1] owned by "a", which the caller says holds nothing
    with pytest.raises(PoolIntegrityError, match="should belong to 'b'"):
        pool.check({"a": [a[1]], "b": [a[0]]})
    pool.check({"a": [a[1]]})


def test_no_layers_is_a_valid_empty_pool():
    kv = KVPool(4, 16, [], 2, 8, "float32", "cpu")
    state = StatePool(3, [], (1,), (1,), device="cpu")
    assert kv.k_bytes == 0 and state.ssm_bytes == 0
    assert state.alloc("x") == 0  # slots still count requests for a model without state layers
    with pytest.raises(PoolLayerError, match=r"it holds layers \[\]"):
        kv.k(0)


ops = st.lists(st.tuples(st.sampled_from(["alloc", "free"]), st.integers(0, 5), st.integers(0, 10**6)), max_size=60)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_random_alloc_free_keeps_invariants(script):
    kv, state = small_kv(num_pages=12, layers=[1]), small_state(num_slots=5, layers=[0])
    held_pages: dict[str, list[int]] = {}
    held_slots: dict[str, list[int]] = {}
    for n, (op, count, pick) in enumerate(script):
        owner = f"r{n}"
        if op == "alloc":
            if count <= kv.num_free_pages:
                held_pages[owner] = kv.alloc(count, owner=owner)
            else:
                with pytest.raises(PoolExhaustedError):
                    kv.alloc(count, owner=owner)
            if state.num_free_slots:
                held_slots[owner] = [state.alloc(owner)]
            else:
                with pytest.raises(PoolExhaustedError):
                    state.alloc(owner)
        else:
            if held_pages:
                victim = sorted(held_pages)[pick % len(held_pages)]
                kv.free(held_pages.pop(victim))
            if held_slots:
                victim = sorted(held_slots)[pick % len(held_slots)]
                state.free(held_slots.pop(victim)[0])
        held_pages = {k: v for k, v in held_pages.items() if v}
        kv.check(held_pages)
        state.check(held_slots)
        all_pages = [p for v in held_pages.values() for p in v]
        assert len(all_pages) == len(set(all_pages)) == kv.num_used_pages
        assert kv.num_used_pages + kv.num_free_pages == 12
    for pages in held_pages.values():
        kv.free(pages)
    for (slot,) in held_slots.values():
        state.free(slot)
    kv.check({})
    state.check({})
    assert kv.num_free_pages == 12 and state.num_free_slots == 5
