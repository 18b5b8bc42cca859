"""What one SGLang release profile holds: the facts the rules, the planner and diagnosis need, each
with the file and line of that release's source it was read from (the data: sglang_releases.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

# The facts a profile carries, in the order the maintainer script prints them. Each one has a
# source ("python/sglang/srt/...:LINE") in `SglangProfile.sources`; line 0 means "searched for in
# that file and absent from this release".
FACTS = (
    "extra_buffer_arch_message", "extra_buffer_platforms", "extra_buffer_platform_message", "extra_buffer_refused_on_xpu",
    "extra_buffer_needs_triton_linear_backend", "auto_strategy_rule", "no_buffer_messages",
    "rejects_strategy_without_mamba", "triton_refused", "triton_probes_layer0", "intel_xpu_page_message", "intel_xpu_page_message_mla",
    "intel_xpu_snaps_on_prefill_backend", "memory_ladder", "reserve_base_mb", "reserve_floor", "xpu_extra_reserve_mb",
    "mem_fraction_without_gpu_mem", "graph_reserve_mb", "prefill_graph_default", "graph_max_bs_capped_by_running", "xpu_decode_graph_opt_in", "xpu_causal_conv1d_bound", "linear_attn_backends", "gdn_blackwell_backends", "mamba_ratio_rule", "lazy_overlap_message",
    "scheduler_strategy_alias",
)


@dataclass(frozen=True)
class SglangProfile:
    version: tuple[int, int, int]
    era: str  # "server_args" (the strategy checks in server_args.py) or "arg_groups" (hooks + resolution passes)
    where: str  # the file that holds the mamba strategy checks in this release
    # validate_mamba_extra_buffer's first assert: "extra_buffer is not supported for {arch}; use no_buffer."
    extra_buffer_arch_message: str
    # extra_buffer's platform gate (validate_mamba_extra_buffer): platforms allowed and the assert's text.
    extra_buffer_platforms: tuple[str, ...]
    extra_buffer_platform_message: str
    # supports_mamba_cache_extra_buffer() answers False on XPU (auto picks no_buffer there; an explicit
    # extra_buffer fails "extra_buffer is not supported for {arch}; use no_buffer.").
    extra_buffer_refused_on_xpu: bool
    # ... and needs --linear-attn-backend triton.
    extra_buffer_needs_triton_linear_backend: bool
    auto_strategy_rule: str  # "overlap_or_paging": auto -> extra_buffer when (overlap or page > 1) and supported
    no_buffer_messages: tuple[str, ...]  # validate_mamba_no_buffer's asserts: page, overlap, trtllm_mha
    # An explicit extra_buffer/lazy strategy on a model without mamba state is a ValueError at
    # arguments ("needs mamba state"); before, it crashed at decode (#39430).
    rejects_strategy_without_mamba: bool
    # The model adjustments assert attention_backend != "triton" for these architectures: ((archs,
    # message with {arch}), ...). They run before the default backend is filled in, so only an
    # explicit --attention-backend triton meets them.
    triton_refused: tuple[tuple[tuple[str, ...], str], ...]
    # TritonAttnBackend reads get_value_buffer(0) for Mamba2 hybrids (fixed by PR #32227).
    triton_probes_layer0: bool
    # _intel_xpu_page_constraint's warning ({old}: the page size asked for), and whether an intel_xpu
    # prefill backend alone also snaps the page size.
    intel_xpu_page_message: str
    intel_xpu_page_message_mla: str
    intel_xpu_snaps_on_prefill_backend: bool
    # handle_gpu_memory_settings: (below this many GB or None, chunked_prefill_size, decode
    # cuda-graph max_bs with tp < 4, with tp >= 4) from the smallest device up.
    memory_ladder: tuple[tuple[int | None, int, int, int], ...]
    reserve_base_mb: int  # reserved_mem = base + 1.5 x activation tokens + tp*pp/8 GB + graph reserve
    reserve_floor: tuple[int, int]  # (above this many MB of device memory, reserve at least this many MB)
    xpu_extra_reserve_mb: int  # oneDNN scratch added on XPU (0: none)
    mem_fraction_without_gpu_mem: float  # mem_fraction_static when the device memory is unknown
    graph_reserve_mb: tuple[int, int, float]  # (MB per decode max_bs, MB per prefill graph size, MB for MLA prefill)
    prefill_graph_default: tuple[str, str]  # default prefill cuda-graph backend (on CUDA, elsewhere)
    graph_max_bs_capped_by_running: bool  # a default decode graph max_bs above --max-running-requests drops to it
    xpu_decode_graph_opt_in: bool  # on XPU decode cuda graphs stay off unless --cuda-graph-backend-decode is given
    xpu_causal_conv1d_bound: bool  # mamba.py binds the Triton causal_conv1d on XPU (else NameError at prefill)
    linear_attn_backends: tuple[str, ...]  # --linear-attn-backend choices (argparse refuses others)
    # Hybrid GDN models on Blackwell: (backends allowed on SM100, on SM120, "attention_backend" when the
    # assert names the one backend, "prefill_decode" when it names the pair).
    gdn_blackwell_backends: tuple[tuple[str, ...], tuple[str, ...], str]
    mamba_ratio_rule: str
    lazy_overlap_message: str  # _calculate_mamba_ratio: extra_buffer_lazy without the overlap schedule
    scheduler_strategy_alias: bool  # the deprecated alias --mamba-scheduler-strategy still exists
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    # Diagnosis's SGLang message fragments this release's source holds: text -> "path:line" (a text
    # that is not a key is not printed by this release). Written by tools/sglang_facts.py.
    messages: dict[str, str] = field(default_factory=dict, compare=False)
    notes: str = ""

    @property
    def label(self) -> str:
        return ".".join(map(str, self.version))

    @property
    def release(self):
        """The release as a Version (core.versions.release), for comparing with what users name."""
        from bringup.core.versions import release

        return release(self.version)

    def source(self, fact: str) -> str:
        """'python/sglang/srt/...:LINE (sglang X)': where this release says it."""
        where = self.sources.get(fact, "")
        path, _, line = where.rpartition(":")
        if line == "0":
            return f"{path} (absent in sglang {self.label})"
        return f"{where} (sglang {self.label})" if where else f"sglang {self.label}"

    def capacity_defaults(self, device_memory_mb: float, tp: int) -> tuple[int, int, str]:
        """(chunked_prefill_size, decode cuda-graph max_bs, why) that this release picks for a device."""
        for below, chunk, bs_small, bs_large in self.memory_ladder:
            if below is None or device_memory_mb < below * 1024:
                bs = bs_small if tp < 4 or below is None else bs_large
                band = f"below {below} GB" if below else f"{self.memory_ladder[-2][0]} GB or more"
                return chunk, bs, f"sglang {self.label} default for devices {band}"
        raise AssertionError("memory ladder has no final rung")

    def triton_refusal(self, architecture: str) -> str | None:
        """The assert text this release raises for an explicit triton backend on `architecture`, or None."""
        for archs, text in self.triton_refused:
            if architecture in archs:
                return text.format(arch=architecture)
        return None

    def to_json(self) -> dict:
        return {"version": self.label, "era": self.era, "where": self.where, "notes": self.notes,
                "sources": dict(self.sources)}
