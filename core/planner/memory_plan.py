"""What a memory plan says: plain dataclasses with `to_json()`, shared by the CLI, the Plan tab
and the embedded engine (which sizes its pools from `kv_tokens` and `state_slots`).

All byte and capacity figures are per device (one TP rank of the busiest PP stage).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from bringup.core.errors import UserError

# What limits max_running_requests: the KV pool, the state pool, the requested cap, or weights
# that leave no room for any pool.
BOTTLENECKS = ("kv", "state", "max_running_requests", "weights")


@dataclass(frozen=True)
class Segment:
    """One slice of the device-memory bar."""

    name: str  # weights | kv_pool | state_pool | reserve | free
    bytes: int
    label: str


@dataclass(frozen=True)
class Capacity:
    """What the pools hold: tokens, state slots, requests."""

    kv_bytes_per_token: int
    state_bytes_per_request: int
    kv_tokens: int
    state_slots: int
    max_running_requests: int
    requests_at_context: int  # requests of `context` tokens each that fit at once
    bottleneck: str  # one of BOTTLENECKS: what limits max_running_requests

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage (one rank of it)."""

    stage: int
    layers: tuple[int, int]  # [first, last] global layer ids on this stage
    kv_layers: int
    state_layers: int
    weights_bytes: int
    kv_bytes_per_token: int
    state_bytes_per_request: int
    kv_tokens: int | None  # None: this stage holds no KV layer (no token limit of its own)
    state_slots: int

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class MemoryPlan:
    model: str
    target: str  # "embedded" or "sglang==X.Y.Z"
    device: str
    device_memory: int
    mem_fraction: float
    tp: int
    pp: int
    dtype: str
    kv_dtype: str
    conv_dtype: str
    ssm_dtype: str
    page_size: int
    context: int
    weights_bytes: int  # on this device
    weights_source: str  # checkpoint | params | given
    kv_bytes_per_token: int
    state_bytes_per_request: int
    conv_bytes_per_request: int
    ssm_bytes_per_request: int
    kv_tokens: int  # a multiple of page_size
    state_slots: int
    max_running_requests: int
    requests_at_context: int
    bottleneck: str
    strategy: str  # SGLang's mamba radix-cache strategy as resolved, or "embedded"
    state_slots_per_request: int  # slots one running request holds (SGLang's mamba ratio)
    kv_layers: int
    state_layers: int
    all_attention: Capacity | None  # the same device if every mixer layer were full attention
    breakdown: list[Segment] = field(default_factory=list)
    stages: list[StagePlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # assumptions worth knowing
    problems: list[str] = field(default_factory=list)  # why this launch would not fit
    # The target's defaults the plan assumed, setting -> "value (why; source)"; a value the user
    # passed is not here (e.g. chunked_prefill_size, cuda_graph_max_bs, mem_fraction_static).
    assumed: dict[str, str] = field(default_factory=dict)
    # The embedded engine's SWA pool (sliding-window layers beside full ones): its tokens, bytes per
    # token over the sliding layers, and window. 0 when the sliding layers share the KV pool.
    swa_tokens: int = 0
    swa_bytes_per_token: int = 0
    swa_window: int = 0
    # The embedded engine: prompt tokens one step carries beside its decode rows (step_budget.py's
    # choice unless the user gave --chunked-prefill-size). None for other targets (see `assumed`).
    chunked_prefill_size: int | None = None
    # ... and in a step where running requests decode (step_budget.mixed_budget unless the user gave
    # --mixed-prefill-size): at most the chunk, so the decodes' inter-token gaps stay short.
    mixed_prefill_size: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def kv_pages(self) -> int:
        return self.kv_tokens // self.page_size

    @property
    def capacity(self) -> Capacity:
        return Capacity(
            self.kv_bytes_per_token, self.state_bytes_per_request, self.kv_tokens, self.state_slots,
            self.max_running_requests, self.requests_at_context, self.bottleneck,
        )

    def require_fit(self) -> MemoryPlan:
        """Raise a UserError saying what does not fit (for the engine, which cannot start then)."""
        if self.problems:
            raise UserError("; ".join(self.problems))
        return self

    def to_json(self) -> dict:
        out = asdict(self)
        out["all_attention"] = self.all_attention.to_json() if self.all_attention else None
        out["kv_pages"] = self.kv_pages
        out["ok"] = self.ok
        return out
