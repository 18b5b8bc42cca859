"""SGLang's memory defaults for one launch, by release (the profile's facts) and device memory.

handle_gpu_memory_settings picks chunked_prefill_size and the decode cuda-graph max_bs from the
device's memory (the profile's `memory_ladder`), then, when --mem-fraction-static is not given,
reserves `base + 1.5 x max(chunked_prefill, 2048) + tp*pp/8 x 1024 + graph reserve` MB (at least
the floor on large devices, plus the XPU scratch from 0.5.20 on) and sets
mem_fraction_static = round((gpu_mem - reserved) / gpu_mem, 3). What the user passes wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MB = 1024**2


def prefill_graph_sizes(max_bs: int) -> list[int]:
    """The token counts SGLang captures prefill graphs for, up to max_bs (cuda_graph_hook.py,
    generate_prefill_cuda_graph_batch_sizes; the same ladder 0.5.17 to 0.5.23)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


@dataclass
class SglangDefaults:
    chunked_prefill_size: int
    cuda_graph_max_bs: int
    mem_fraction: float | None  # None: the user gave --mem-fraction-static
    reserved_mb: float
    assumed: dict[str, str] = field(default_factory=dict)  # setting -> "value (why)", for the plan to show


def sglang_defaults(profile, *, device: str, device_memory: int, tp: int, pp: int, mla: bool,
                    mem_fraction: float | None, chunked_prefill_size: int | None, cuda_graph_max_bs: int | None,
                    max_running_requests: int | None, disable_cuda_graph: bool = False) -> SglangDefaults:
    gpu_mb = device_memory / MB
    chunk, max_bs, why = profile.capacity_defaults(gpu_mb, tp)
    assumed: dict[str, str] = {}
    src = profile.source("memory_ladder")
    if chunked_prefill_size is None:
        chunked_prefill_size = chunk
        assumed["chunked_prefill_size"] = f"{chunk} ({why}; {src})"
    if cuda_graph_max_bs is None:
        if profile.graph_max_bs_capped_by_running and max_running_requests is not None and max_running_requests < max_bs:
            max_bs, why = max_running_requests, "capped at --max-running-requests"
        cuda_graph_max_bs = max_bs
        assumed["cuda_graph_max_bs"] = f"{max_bs} ({why}; {src})"
    if mem_fraction is not None:
        return SglangDefaults(chunked_prefill_size, cuda_graph_max_bs, None, 0.0, assumed)

    per_decode, per_prefill_size, mla_prefill = profile.graph_reserve_mb
    # On XPU decode graphs are opt-in (--cuda-graph-backend-decode): off by default, nothing reserved.
    xpu_off = device == "xpu" and profile.xpu_decode_graph_opt_in
    graphs = 0.0 if disable_cuda_graph or device == "cpu" or xpu_off else cuda_graph_max_bs * per_decode
    graph_parts = [f"decode graphs {cuda_graph_max_bs} x {per_decode} MB"] if graphs else []
    remarks = ([f"no decode graphs on XPU by default, {profile.source('xpu_decode_graph_opt_in')}"]
               if xpu_off and not disable_cuda_graph else [])
    on_cuda, elsewhere = profile.prefill_graph_default
    prefill_backend = on_cuda if device == "cuda" else elsewhere  # ROCm: is_cuda() is False under HIP
    # Off CUDA, SGLang switches piecewise prefill graphs off for non-CUDA hardware (XPU, HIP, NPU...).
    if not disable_cuda_graph and device == "cuda" and prefill_backend != "disabled":
        prefill = mla_prefill if mla else len(prefill_graph_sizes(chunked_prefill_size)) * per_prefill_size
        graphs += prefill
        graph_parts.append(f"prefill graphs {prefill:,.0f} MB")
    activation = max(chunked_prefill_size, 2048)
    reserved = profile.reserve_base_mb + 1.5 * activation + tp * pp / 8 * 1024 + graphs
    floor_above, floor = profile.reserve_floor
    if gpu_mb > floor_above:
        reserved = max(reserved, floor)
    reserved += profile.xpu_extra_reserve_mb if device == "xpu" else 0
    fraction = round((gpu_mb - reserved) / gpu_mb, 3)
    parts = [f"{profile.reserve_base_mb} + 1.5 x {activation}", f"TP x PP {tp * pp}/8 GB"] + graph_parts
    if gpu_mb > floor_above:
        parts.append(f"at least {floor:,} MB above {floor_above // 1024} GB")
    if device == "xpu" and profile.xpu_extra_reserve_mb:
        parts.append(f"XPU +{profile.xpu_extra_reserve_mb} MB")
    assumed["mem_fraction_static"] = (f"{fraction:.3f} (auto: reserves {reserved:,.0f} MB = {' + '.join(parts)}; "
                                      + "".join(f"{r}; " for r in remarks) + f"{profile.source('reserve_base_mb')})")
    return SglangDefaults(chunked_prefill_size, cuda_graph_max_bs, max(0.0, fraction), reserved, assumed)
