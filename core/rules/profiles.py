"""SGLang rule profiles, keyed by release: what changed between versions, as data.

Each profile records only what was read in that release's source (see
`../shared/reference/sglang-notes.md` §3-§4 and §6): messages are the releases' own text. A version
between two profiles uses the nearest earlier one and the validator says so; a version older than
the oldest profile is refused rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SglangProfile:
    version: tuple[int, int, int]
    era: str  # "server_args" (one big server_args.py) or "arg_groups" (hooks + resolution passes)
    where: str  # the file that holds the mamba strategy checks in this release
    # extra_buffer's platform gate: platforms allowed and the assert's text.
    extra_buffer_platforms: tuple[str, ...]
    extra_buffer_platform_message: str
    # supports_mamba_cache_extra_buffer() answers False on XPU (so auto picks no_buffer there and an
    # explicit extra_buffer fails "extra_buffer is not supported for {arch}; use no_buffer.").
    extra_buffer_refused_on_xpu: bool
    # ... and needs --linear-attn-backend triton.
    extra_buffer_needs_triton_linear_backend: bool
    # TritonAttnBackend reads get_value_buffer(0) for hybrid models (fixed by PR #32227).
    triton_probes_layer0: bool
    # An explicit extra_buffer/lazy strategy on a model without mamba state is rejected at arguments
    # ("needs mamba state"); before, it crashed at decode (#39430).
    rejects_strategy_without_mamba: bool
    # The deprecated alias --mamba-scheduler-strategy still exists.
    scheduler_strategy_alias: bool
    notes: str = ""

    @property
    def label(self) -> str:
        return ".".join(map(str, self.version))

    def to_json(self) -> dict:
        return {"version": self.label, "era": self.era, "where": self.where, "notes": self.notes}


_ARG_GROUPS = "python/sglang/srt/arg_groups/mamba_hook.py, model_hook.py, overrides.py"

PROFILES: tuple[SglangProfile, ...] = (
    SglangProfile(
        version=(0, 5, 17), era="server_args", where="python/sglang/srt/server_args.py",
        extra_buffer_platforms=("cuda", "musa", "npu", "rocm"),
        extra_buffer_platform_message="extra_buffer needs CUDA/MUSA/NPU/ROCm (FLA).",
        extra_buffer_refused_on_xpu=False, extra_buffer_needs_triton_linear_backend=False,
        triton_probes_layer0=True, rejects_strategy_without_mamba=False, scheduler_strategy_alias=True,
        notes="the release PR #32227 patched: both of its XPU crashes are present",
    ),
    SglangProfile(
        version=(0, 5, 19), era="arg_groups", where=_ARG_GROUPS,
        extra_buffer_platforms=("cuda", "musa", "npu", "rocm", "xpu"),
        extra_buffer_platform_message="extra_buffer needs CUDA/MUSA/NPU/ROCm/XPU (FLA).",
        extra_buffer_refused_on_xpu=False, extra_buffer_needs_triton_linear_backend=True,
        triton_probes_layer0=False, rejects_strategy_without_mamba=False, scheduler_strategy_alias=True,
        notes="after PR #32227: XPU passes the extra_buffer gate; triton reads get_v_head_dim() for hybrids",
    ),
    SglangProfile(
        version=(0, 5, 21), era="arg_groups", where=_ARG_GROUPS,
        extra_buffer_platforms=("cuda", "musa", "npu", "rocm", "xpu"),
        extra_buffer_platform_message="extra_buffer requires platform support for Mamba cache state snapshots.",
        extra_buffer_refused_on_xpu=True, extra_buffer_needs_triton_linear_backend=True,
        triton_probes_layer0=False, rejects_strategy_without_mamba=False, scheduler_strategy_alias=False,
        notes="supports_mamba_cache_extra_buffer() refuses XPU: auto gives no_buffer there, explicit extra_buffer fails",
    ),
    SglangProfile(
        version=(0, 5, 23), era="arg_groups", where=_ARG_GROUPS,
        extra_buffer_platforms=("cuda", "musa", "npu", "rocm", "xpu"),
        extra_buffer_platform_message="extra_buffer requires platform support for Mamba cache state snapshots.",
        extra_buffer_refused_on_xpu=True, extra_buffer_needs_triton_linear_backend=True,
        triton_probes_layer0=False, rejects_strategy_without_mamba=True, scheduler_strategy_alias=False,
        notes="newest release read; an explicit extra_buffer on a non-mamba model is rejected at arguments (#39430)",
    ),
)
OLDEST, NEWEST = PROFILES[0], PROFILES[-1]


def profile_for(version: tuple[int, int, int]) -> SglangProfile | None:
    """The profile of the nearest release at or before `version`, or None when it predates them all."""
    earlier = [p for p in PROFILES if p.version <= version]
    return earlier[-1] if earlier else None
