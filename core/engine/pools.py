"""The engine's memory pools, allocated once at start-up.

- `KVPool`: paged K and V for the full-attention layers only. Per layer a `[num_pages, page_size,
  Hkv, D]` tensor; a request owns whole pages, listed in its block table.
- `SWAPool` (models with both sliding-window and full attention layers, as SGLang's SWA pool): the
  same paged layout for the sliding layers, but a request keeps only the pages its window still
  reaches; the scheduler frees the others as the window moves (`SWAPool.expired_pages`).
- `StatePool`: one slot per running request holding the conv state and the SSM state of every
  state (Mamba2) layer. The SSM state is fp32 by default: it accumulates over the whole sequence.

A pool stores only its own layers, so a global layer id is translated to a pool index; asking for
a layer the pool does not hold raises `PoolLayerError` (the SGLang PR #32227 crash, made clear).
Both pools track who owns each page/slot so that `check()` can prove nothing is owned twice and,
given the owners the scheduler believes in, that nothing leaked.
"""

from __future__ import annotations

import torch

from .facts import unknown_dtype_message


class PoolLayerError(ValueError):
    """A pool was asked for a layer it does not hold."""

    def __init__(self, layer_id: int, pool_name: str, layer_ids: tuple[int, ...]):
        self.layer_id = layer_id
        self.layer_ids = list(layer_ids)
        super().__init__(f"layer {layer_id} is not in the {pool_name}; it holds layers {self.layer_ids}")


class PoolExhaustedError(RuntimeError):
    """More pages or slots were asked for than are free (the scheduler checks before asking)."""


class PoolIntegrityError(RuntimeError):
    """A page or slot is owned twice, freed twice, or leaked."""


def as_dtype(dtype) -> torch.dtype:
    """Accept a torch.dtype or its name ("bfloat16", "float32", "fp16"...)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    aliases = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}
    name = aliases.get(str(dtype), str(dtype)).removeprefix("torch.")
    found = getattr(torch, name, None)
    if not isinstance(found, torch.dtype):
        raise ValueError(unknown_dtype_message(dtype))
    return found


class _Ids:
    """Free list of ids 0..n-1 with an owner per allocated id, for integrity checks."""

    def __init__(self, n: int, what: str):
        self.n, self.what = n, what
        # Popping from the end hands out low ids first, which keeps test output readable.
        self._free = list(range(n - 1, -1, -1))
        self._owner: dict[int, object] = {}

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return len(self._owner)

    def alloc(self, count: int, owner) -> list[int]:
        if count < 0:
            raise ValueError(f"cannot allocate {count} {self.what}s")
        if count > len(self._free):
            raise PoolExhaustedError(f"asked for {count} {self.what}s but only {len(self._free)} of {self.n} are free")
        ids = [self._free.pop() for _ in range(count)]
        for i in ids:
            if i in self._owner:  # only possible if the free list was corrupted
                raise PoolIntegrityError(f"{self.what} {i} handed out while owned by {self._owner[i]!r}")
            self._owner[i] = owner
        return ids

    def free(self, ids) -> None:
        ids = list(ids)
        if len(set(ids)) != len(ids):
            raise PoolIntegrityError(f"{self.what}s {ids} freed with repeats")
        for i in ids:
            if i not in self._owner:
                raise PoolIntegrityError(f"{self.what} {i} freed but it is not allocated")
        for i in ids:
            del self._owner[i]
            self._free.append(i)

    def owners(self) -> dict[object, list[int]]:
        out: dict[object, list[int]] = {}
        for i, who in self._owner.items():
            out.setdefault(who, []).append(i)
        return {who: sorted(ids) for who, ids in out.items()}

    def check(self, expected: dict | None = None) -> None:
        """Every id is free xor owned, exactly once; with `expected` ({owner: ids}), ownership
        matches it exactly (an id owned here but by nobody in `expected` is a leak)."""
        free = self._free
        if len(set(free)) != len(free):
            raise PoolIntegrityError(f"a {self.what} is on the free list twice")
        both = set(free) & self._owner.keys()
        if both:
            raise PoolIntegrityError(f"{self.what}s {sorted(both)} are both free and owned")
        if len(free) + len(self._owner) != self.n or any(not 0 <= i < self.n for i in free):
            raise PoolIntegrityError(
                f"{self.what} count mismatch: {len(free)} free + {len(self._owner)} owned != {self.n}"
            )
        if expected is None:
            return
        seen: dict[int, object] = {}
        for who, ids in expected.items():
            for i in ids:
                if i in seen:
                    raise PoolIntegrityError(f"{self.what} {i} is owned by both {seen[i]!r} and {who!r}")
                seen[i] = who
                if self._owner.get(i, _MISSING) != who:
                    raise PoolIntegrityError(
                        f"{self.what} {i} should belong to {who!r} but the pool has it "
                        f"{'free' if i not in self._owner else 'owned by ' + repr(self._owner[i])}"
                    )
        leaked = sorted(set(self._owner) - set(seen))
        if leaked:
            raise PoolIntegrityError(
                f"{len(leaked)} {self.what}(s) leaked: {leaked[:16]} owned by "
                f"{sorted({repr(self._owner[i]) for i in leaked})[:8]} which hold nothing"
            )


_MISSING = object()


class KVPool:
    """Paged K/V cache over the full-attention layers only."""

    name = "KV pool"

    def __init__(self, num_pages: int, page_size: int, layer_ids, num_kv_heads: int, head_dim: int,
                 dtype="bfloat16", device="cpu", v_head_dim: int | None = None, latent: bool = False):
        if num_pages < 0 or page_size < 1:
            raise ValueError(f"KV pool needs num_pages >= 0 and page_size >= 1, got {num_pages} and {page_size}")
        self.num_pages, self.page_size = int(num_pages), int(page_size)
        self.layer_ids = tuple(int(i) for i in layer_ids)
        if len(set(self.layer_ids)) != len(self.layer_ids):
            raise ValueError(f"KV pool layer ids repeat: {list(self.layer_ids)}")
        self.index = {lid: i for i, lid in enumerate(self.layer_ids)}
        self.num_kv_heads, self.head_dim = int(num_kv_heads), int(head_dim)
        # latent (MLA): one vector per token and layer, the compressed latent and the rope key; the
        # attention reads it as keys and as values (`v` is `k`), and the model keeps the value part.
        self.latent = bool(latent)
        self.v_head_dim = self.head_dim if self.latent else int(v_head_dim or head_dim)
        self.dtype, self.device = as_dtype(dtype), torch.device(device)
        # One K and one V tensor per layer, not views of one tensor for all layers: a compiled decode
        # step (cpu_compiled_decode.py) writes into the layers it is given, where views of a shared
        # base would make it copy the whole base back after every step.
        self._k = [torch.zeros(self.num_pages, self.page_size, self.num_kv_heads, self.head_dim, dtype=self.dtype,
                               device=self.device) for _ in self.layer_ids]
        self._v = self._k if self.latent else [
            torch.zeros(self.num_pages, self.page_size, self.num_kv_heads, self.v_head_dim, dtype=self.dtype,
                        device=self.device) for _ in self.layer_ids]
        self._ids = _Ids(self.num_pages, "KV page")

    # Layer access
    def pool_index(self, layer_id: int) -> int:
        try:
            return self.index[layer_id]
        except KeyError:
            raise PoolLayerError(layer_id, self.name, self.layer_ids) from None

    def k(self, layer_id: int) -> torch.Tensor:
        return self._k[self.pool_index(layer_id)]

    def v(self, layer_id: int) -> torch.Tensor:
        return self._v[self.pool_index(layer_id)]

    def get_v_head_dim(self) -> int:
        """V head size without touching any layer (what PR #32227 added to SGLang)."""
        return self.v_head_dim

    # Pages
    def alloc(self, n_pages: int, owner=None) -> list[int]:
        return self._ids.alloc(n_pages, owner)

    def free(self, pages) -> None:
        self._ids.free(pages)

    def pages_for(self, num_tokens: int) -> int:
        return -(-int(num_tokens) // self.page_size)

    def check(self, owners: dict | None = None) -> None:
        self._ids.check(owners)

    def owners(self) -> dict:
        return self._ids.owners()

    # Usage counters
    @property
    def num_free_pages(self) -> int:
        return self._ids.num_free

    @property
    def num_used_pages(self) -> int:
        return self._ids.num_used

    @property
    def capacity_tokens(self) -> int:
        return self.num_pages * self.page_size

    @property
    def k_bytes(self) -> int:
        return _bytes(self._k)

    @property
    def v_bytes(self) -> int:
        return 0 if self.latent else _bytes(self._v)

    @property
    def bytes_per_token(self) -> int:
        per_head = self.head_dim + (0 if self.latent else self.v_head_dim)
        return len(self.layer_ids) * self.num_kv_heads * per_head * self.dtype.itemsize

    def __repr__(self) -> str:
        return (f"KVPool(pages={self.num_pages}x{self.page_size}, layers={list(self.layer_ids)}, "
                f"free={self.num_free_pages}, dtype={self.dtype})")


class SWAPool(KVPool):
    """Paged K/V of the sliding-window layers: a request holds only the pages inside its window.

    A request's SWA block table keeps one entry per page of its context, like the KV table, so a
    position maps to the same page index in both; entries the window has left are freed and point
    at a page the attention kernels read but mask (they attend within the window only)."""

    name = "SWA pool"

    def __init__(self, num_pages: int, page_size: int, layer_ids, num_kv_heads: int, head_dim: int, window: int,
                 dtype="bfloat16", device="cpu"):
        super().__init__(num_pages, page_size, layer_ids, num_kv_heads, head_dim, dtype, device)
        if window < 1:
            raise ValueError(f"SWA pool needs a window of at least 1 token, got {window}")
        self.window = int(window)

    def expired_pages(self, num_computed: int) -> int:
        """How many leading pages no future query can see once `num_computed` tokens are cached:
        the next query sits at position num_computed and sees positions > num_computed - window."""
        first_needed = max(0, num_computed - self.window + 1)
        return first_needed // self.page_size

    def pages_at_most(self, num_tokens: int) -> int:
        """The most pages one request holds at once with `num_tokens` new tokens in a step."""
        return self.pages_for(self.window - 1 + num_tokens) + 1

    def __repr__(self) -> str:
        return (f"SWAPool(pages={self.num_pages}x{self.page_size}, window={self.window}, layers={list(self.layer_ids)}, "
                f"free={self.num_free_pages}, dtype={self.dtype})")


class StatePool:
    """Per-request slots of conv and SSM state for the state (Mamba2) layers."""

    name = "state pool"

    def __init__(self, num_slots: int, layer_ids, conv_shape, ssm_shape, conv_dtype="bfloat16",
                 ssm_dtype="float32", device="cpu"):
        if num_slots < 0:
            raise ValueError(f"state pool needs num_slots >= 0, got {num_slots}")
        self.num_slots = int(num_slots)
        self.layer_ids = tuple(int(i) for i in layer_ids)
        if len(set(self.layer_ids)) != len(self.layer_ids):
            raise ValueError(f"state pool layer ids repeat: {list(self.layer_ids)}")
        self.index = {lid: i for i, lid in enumerate(self.layer_ids)}
        self.conv_shape, self.ssm_shape = tuple(conv_shape), tuple(ssm_shape)
        self.conv_dtype, self.ssm_dtype = as_dtype(conv_dtype), as_dtype(ssm_dtype)
        self.device = torch.device(device)
        # One tensor per layer, as the KV pool's (KVPool.__init__ says why).
        self._conv = [torch.zeros(self.num_slots, *self.conv_shape, dtype=self.conv_dtype, device=self.device)
                      for _ in self.layer_ids]
        self._ssm = [torch.zeros(self.num_slots, *self.ssm_shape, dtype=self.ssm_dtype, device=self.device)
                     for _ in self.layer_ids]
        self._ids = _Ids(self.num_slots, "state slot")

    def pool_index(self, layer_id: int) -> int:
        try:
            return self.index[layer_id]
        except KeyError:
            raise PoolLayerError(layer_id, self.name, self.layer_ids) from None

    def conv(self, layer_id: int) -> torch.Tensor:
        return self._conv[self.pool_index(layer_id)]

    def ssm(self, layer_id: int) -> torch.Tensor:
        return self._ssm[self.pool_index(layer_id)]

    def alloc(self, owner=None) -> int:
        """A zeroed slot: a new request starts from the zero state."""
        (slot,) = self._ids.alloc(1, owner)
        if self.layer_ids:
            torch._foreach_zero_([t[slot] for t in self._conv + self._ssm])  # one launch on a GPU
        return slot

    def free(self, slot: int) -> None:
        self._ids.free([slot])

    def check(self, owners: dict | None = None) -> None:
        self._ids.check(owners)

    def owners(self) -> dict:
        return self._ids.owners()

    @property
    def num_free_slots(self) -> int:
        return self._ids.num_free

    @property
    def num_used_slots(self) -> int:
        return self._ids.num_used

    @property
    def conv_bytes(self) -> int:
        return _bytes(self._conv)

    @property
    def ssm_bytes(self) -> int:
        return _bytes(self._ssm)

    @property
    def bytes_per_slot(self) -> int:
        return (self.conv_bytes + self.ssm_bytes) // self.num_slots if self.num_slots else 0

    def __repr__(self) -> str:
        return (f"StatePool(slots={self.num_slots}, layers={list(self.layer_ids)}, free={self.num_free_slots}, "
                f"conv={self.conv_shape}:{self.conv_dtype}, ssm={self.ssm_shape}:{self.ssm_dtype})")


def _bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)
