"""vLLM's rules for one launch, in the order vLLM applies them: architecture, platform, attention
backend, the hybrid KV cache (mamba_cache_mode, block size raised to the Mamba page, padding), TP.
The attention backend and the blocks its kernels take are vllm_attention.py. Facts and their
file:line are in vllm_facts.py; the memory check (max_num_seqs against the Mamba
cache blocks) is vllm_memory.py, run when the device's memory is known."""

from __future__ import annotations

from math import ceil, lcm

from bringup.core.layermap.vocabulary import LayerMap
from bringup.core.layermap import geometry
from bringup.core.layermap.dtypes import canonical_dtype, dtype_bytes, model_dtype
from bringup.core.rules import vllm_facts as F
from bringup.core.rules.check import Check
from bringup.core.rules.model_facts import ModelFacts
from bringup.core.rules.settings import LaunchSettings, Resolved
from bringup.core.rules.vllm_attention import check_attention_backend, kernel_block, starting_block
from bringup.core.rules.vllm_quantization import check_quantization


def check_vllm(m: ModelFacts, s: LaunchSettings, layer_map: LayerMap, version) -> Check:
    """`version`: the release (a Version, core.versions.release)."""
    prefix = not s.disable_radix_cache and F.PREFIX_CACHING_DEFAULT.value
    default_block = F.default_block_size(version)
    r = Resolved(device=s.device, attention_backend=None, page_size=s.page_size or default_block.value,
                 tp=s.tp, pp=s.pp, dtype=s.dtype, kv_dtype=s.kv_dtype, mamba_ssm_dtype=None, mamba_conv_dtype=None,
                 radix_cache=prefix, overlap_schedule=True, state_slots_per_request=1 if m.is_hybrid else None)
    if s.page_size is None:
        r.why["page_size"] = f"vLLM's default block size {default_block.value} ({default_block.source})"
    c = Check(m, s, r)
    c.derived["version"] = version
    cfg = layer_map.config  # the head size as vLLM reads it (config/model.py get_head_size)
    heads = cfg.get("num_attention_heads")
    c.derived["head_dim"] = cfg.get("head_dim") or (cfg.get("hidden_size", 0) // heads if heads else None)
    c.derived["mla_head_size"] = cfg.get("kv_lora_rank", 0) + cfg.get("qk_rope_head_dim", 0)  # model.py get_head_size
    _architecture(c)
    _platform(c)
    if s.device in F.DEVICES.value:  # ModelConfig checks the method before the attention backend is picked
        check_quantization(c)
    _float16(c, layer_map)
    check_attention_backend(c)
    starting_block(c)
    if m.is_hybrid:
        _mamba_cache_mode(c)
        _page_alignment(c, layer_map)
    _tensor_parallel(c)
    if m.is_hybrid and s.pp > 1:
        _pipeline(c, layer_map)
    return c


def _architecture(c: Check) -> None:
    arch = c.m.architecture
    if arch in F.REMOVED:
        c.add("VLLM_ARCH_REMOVED", "error", f"vLLM removed {arch} after v{F.REMOVED[arch]}.",
              fix=f"serve it with vllm=={F.REMOVED[arch]} or with SGLang", stage="model load",
              engine_message=F.REMOVED_MESSAGE.format(arch=arch, last=F.REMOVED[arch]), source=F.REMOVED_SOURCE)
    elif arch and arch not in F.ARCHITECTURES:
        c.add("VLLM_ARCH_NOT_READ", "warning",
              f"{arch} is not among the architectures read from vLLM's registry here, so its support is not predicted.",
              fix="check vllm/model_executor/models/registry.py of your release", source="core/rules/vllm_facts.py")


def _platform(c: Check) -> None:
    s = c.s
    if s.device not in F.DEVICES.value:
        c.add("VLLM_DEVICE", "error", f"vLLM has no in-tree platform for {s.device} (it has {', '.join(F.DEVICES.value)}).",
              fix="use the vendor's plugin (vllm-ascend for NPU), or another device", source=F.DEVICES.source,
              stage="start-up")
    elif s.device == "cpu" and c.derived["version"] >= F.CPU_TRITON_REQUIRED_SINCE.value:
        # the rules take the CPU to be a Xeon (x86); whether Triton is in vLLM's environment is not known here
        c.add("VLLM_CPU_TRITON", "warning", f"vLLM {c.derived['version']} stops at start-up on an x86 CPU without "
              "Triton for CPUs (triton-cpu) in its environment.", fix="install triton-cpu beside vLLM",
              engine_message=F.CPU_TRITON_MESSAGE, source=F.CPU_TRITON_REQUIRED_SINCE.source, stage="start-up")
    if s.device in F.DEVICES.value and c.m.is_hybrid and not F.HYBRID_KV_CACHE.value.get(s.device, False):
        c.add("VLLM_NO_HYBRID_KV_CACHE", "error",
              f"Hybrid models need vLLM's hybrid KV cache manager, which the {s.device} platform does not support.",
              fix="run the hybrid on CUDA, ROCm or XPU", layers=tuple(c.m.state_layers), source=F.HYBRID_KV_CACHE.source,
              stage="start-up")


def _float16(c: Check, layer_map: LayerMap) -> None:
    """ModelConfig's dtype check: the model types vLLM refuses to run in float16."""
    s, m = c.s, c.m
    dtype = model_dtype(layer_map.config) if s.dtype == "auto" else canonical_dtype(s.dtype)
    if dtype == "float16" and m.model_type in F.FLOAT16_NOT_SUPPORTED.value:
        c.add("VLLM_DTYPE_FLOAT16", "error", f"vLLM refuses float16 for {m.model_type} models (numerical instability).",
              fix="pass --dtype bfloat16 (or float32)", engine_message=F.FLOAT16_MESSAGE.format(model_type=m.model_type),
              source=F.FLOAT16_NOT_SUPPORTED.source, stage="arguments")


def _mamba_cache_mode(c: Check) -> None:
    r = c.r
    if c.derived["version"] < F.MAMBA_CACHE_MODE_SINCE.value:
        r.mamba_strategy = "none"
        r.why["mamba_strategy"] = (f"vLLM {c.derived['version']} predates mamba_cache_mode "
                                   f"({F.MAMBA_CACHE_MODE_SINCE.source}): one Mamba block per request")
        return
    r.mamba_strategy = "align" if r.radix_cache else "none"
    r.why["mamba_strategy"] = ("prefix caching is on by default, so mamba_cache_mode becomes align (Mamba states "
                               "cached at block boundaries; needs chunked prefill)" if r.radix_cache else
                               "prefix caching off: mamba_cache_mode none (no Mamba prefix states)")
    c.add("VLLM_MAMBA_CACHE_MODE", "info", f"mamba_cache_mode: {r.mamba_strategy} ({r.why['mamba_strategy']}).",
          source=F.MAMBA_CACHE_MODE_SOURCE, layers=tuple(c.m.state_layers))


def _dtypes(c: Check, layer_map: LayerMap) -> tuple[str, str, str]:
    """(kv, conv, ssm) dtypes as vLLM resolves them: the model dtype, NemotronH's float32 SSM default."""
    s, cfg = c.s, layer_map.config
    dtype = model_dtype(cfg) if s.dtype == "auto" else canonical_dtype(s.dtype)
    kv = dtype if s.kv_dtype == "auto" else canonical_dtype(s.kv_dtype)
    declared = cfg.get("mamba_ssm_cache_dtype") or cfg.get("mamba_ssm_dtype")
    if s.mamba_ssm_dtype:
        ssm = s.mamba_ssm_dtype
    elif c.m.architecture == "NemotronHForCausalLM":  # models/config.py:811-832
        ssm = declared or "float32"
    elif c.m.family == "kimi_linear":  # KDA's recurrent state: float32 unless asked
        ssm = F.KDA_STATE_DTYPE.value
    else:
        ssm = dtype
    if s.device == "cpu" and not (s.mamba_ssm_dtype in ("float16", "bfloat16") and c.m.family == "gdn"):
        ssm = F.CPU_SSM_FLOAT32.value  # reset on AVX512-BF16 hosts (vllm_facts.CPU_SSM_FLOAT32)
    c.r.dtype, c.r.kv_dtype, c.r.mamba_conv_dtype, c.r.mamba_ssm_dtype = dtype, kv, dtype, canonical_dtype(ssm)
    return kv, dtype, c.r.mamba_ssm_dtype


def _page_alignment(c: Check, layer_map: LayerMap) -> None:
    """The attention block grows until its page holds one Mamba state; the Mamba page is padded to it."""
    s, r = c.s, c.r
    kv_dtype, conv_dtype, ssm_dtype = _dtypes(c, layer_map)
    kv_layers = [l for l in layer_map.layers if l.is_kv]
    state_layers = [l for l in layer_map.layers if l.is_state]
    if not kv_layers or not state_layers:
        return
    attn_token = max(geometry.kv_bytes_per_token([l], s.tp, dtype_bytes(kv_dtype)) for l in kv_layers)
    mamba_page = max(sum(geometry.state_bytes_per_request([l], s.tp, dtype_bytes(conv_dtype), dtype_bytes(ssm_dtype)))
                     for l in state_layers)
    if not attn_token or not mamba_page:
        return
    asked = r.page_size
    kernel = kernel_block(c)
    align = max(kernel, asked)
    if c.m.mla:
        align = max(align, F.MLA_BLOCK_ALIGNMENT.value)
    if r.mamba_strategy == "align" and _gdn_flashinfer(c, layer_map):
        align = lcm(align, F.GDN_FLASHINFER_ALIGNMENT.value)
    block = align * ceil(mamba_page / (align * attn_token))
    block = kernel * ceil(block / kernel)
    notes = []
    if block > asked:
        notes.append(F.BLOCK_RAISED_MESSAGE.format(block=block))
    else:
        block = asked
    if s.device == "xpu" and c.m.family in ("gdn", "kimi_linear") and block % F.XPU_GDN_BLOCK.value:
        block = ceil(block / F.XPU_GDN_BLOCK.value) * F.XPU_GDN_BLOCK.value
        notes.append(f"[XPU]Setting attention block size to {block} tokens to ensure multiple of {F.XPU_GDN_BLOCK.value}.")
    r.page_size = block
    attn_page = block * attn_token
    pct = 100 * (attn_page - mamba_page) / mamba_page
    if notes:
        r.why["page_size"] = f"raised from {asked} so one attention page holds a Mamba state ({F.PAGE_ALIGNMENT_SOURCE})"
        c.add("VLLM_BLOCK_SIZE_RAISED", "info",
              f"vLLM raises the attention block from {asked} to {block} tokens: one Mamba state is "
              f"{mamba_page:,} B per layer and one token of attention {attn_token:,} B per layer, and both kinds "
              f"share one page size. Prefix caching works in {block}-token blocks.",
              engine_message=" ".join(notes), layers=tuple(c.m.full_attention_layers),
              source=F.PAGE_ALIGNMENT_SOURCE + ("; " + F.XPU_GDN_BLOCK.source if s.device == "xpu" else "")
              + ("; " + F.MLA_BLOCK_ALIGNMENT.source if c.m.mla else ""),
              stage="start-up")
    if attn_page != mamba_page:
        c.add("VLLM_MAMBA_PAGE_PADDED", "info",
              f"Each Mamba page is padded by {pct:.2f}% to the {attn_page:,} B attention page: that share of the "
              "Mamba cache is unused.", engine_message=F.PADDING_MESSAGE.format(pct=pct),
              layers=tuple(c.m.state_layers), source=F.PAGE_ALIGNMENT_SOURCE, stage="start-up")
    c.derived.update(page_bytes=attn_page, layer_counts=(len(kv_layers), len(state_layers)))
    _groups(c, len(kv_layers), len(state_layers))


def _gdn_flashinfer(c: Check, layer_map: LayerMap) -> bool:
    """Whether vLLM runs Qwen's gated DeltaNet prefill with FlashInfer, which checkpoints every 64 tokens:
    CUDA capability 9.0, or 10.x with 128-wide keys (the 0.33.0 wheel's CUDA 13 runtime allows it)."""
    s = c.s
    if c.m.family != "gdn" or s.device != "cuda":
        return False
    return s.gpu == "hopper" or (s.gpu == "blackwell" and layer_map.config.get("linear_key_head_dim") == 128)


def _groups(c: Check, attention: int, state: int) -> None:
    """vLLM's KV cache groups: layers of each kind in groups of one size, the last one padded."""
    size = F.group_size([attention, state])
    groups = [-(-attention // size), -(-state // size)]
    padding = [(-n) % size for n in (attention, state)]
    message = " ".join(F.PADDING_LAYERS_MESSAGE.format(n=p, pct=100 * p / n)
                       for p, n in zip(padding, (attention, state)) if p)
    c.add("VLLM_KV_CACHE_GROUPS", "info",
          f"vLLM's hybrid KV cache puts the {attention} attention and {state} state layers in groups of {size}: "
          f"{groups[0]} attention group(s) and {groups[1]} Mamba group(s), one shared block pool"
          + (f"; {sum(padding)} padding layer(s) take pool memory without holding anything" if any(padding) else "")
          + ". A running request holds one block per Mamba group.",
          engine_message=message, layers=tuple(c.m.state_layers) if padding[1] else (),
          source=F.GROUP_SIZE_SOURCE + ("; " + F.PADDING_LAYERS_SOURCE if message else ""), stage="start-up")


def _tensor_parallel(c: Check) -> None:
    m, tp = c.m, c.s.tp
    if tp == 1:
        return
    if m.attention_heads and m.full_attention_layers and m.attention_heads % tp:
        c.add("TP_ATTENTION_HEADS", "error", f"{m.attention_heads} attention heads do not split over {tp} TP ranks.",
              fix=f"use a --tensor-parallel-size that divides {m.attention_heads}", layers=tuple(m.full_attention_layers),
              engine_message=F.TP_HEADS_MESSAGE.format(heads=m.attention_heads, tp=tp), source=F.TP_HEADS_SOURCE,
              stage="arguments")
    if m.family != "mamba2":
        return
    if m.mamba_heads and m.mamba_heads % tp:
        c.add("TP_MAMBA_HEADS", "error", f"{m.mamba_heads} Mamba2 heads do not split over {tp} TP ranks.",
              fix=f"use a --tensor-parallel-size that divides {m.mamba_heads}", layers=tuple(m.state_layers),
              engine_message=F.TP_MAMBA_HEADS_MESSAGE, source=F.TP_MAMBA_SOURCE, stage="model load")
    if m.mamba_groups and m.mamba_groups % tp and m.mamba_groups != 1:
        c.add("TP_MAMBA_GROUPS", "error",
              f"{m.mamba_groups} Mamba2 groups do not split over {tp} TP ranks, and vLLM replicates only a single group.",
              fix=f"use a --tensor-parallel-size that divides {m.mamba_groups}", layers=tuple(m.state_layers),
              engine_message=F.TP_MAMBA_GROUPS_MESSAGE, source=F.TP_MAMBA_SOURCE, stage="model load")


def _pipeline(c: Check, layer_map: LayerMap) -> None:
    """A PP rank with no attention layer skips the hybrid block alignment (vLLM's own split of the layers)."""
    m, s, r = c.m, c.s, c.r
    attention = set(m.full_attention_layers)
    for stage, (a, b) in enumerate(F.pp_ranges(layer_map.num_layers, s.pp)):
        if attention & set(range(a, b)):
            continue
        state = tuple(i for i in m.state_layers if a <= i < b)
        asked = s.page_size is not None and s.page_size == r.page_size
        c.add("VLLM_PP_STAGE_WITHOUT_ATTENTION", "info" if asked else "warning",
              f"PP stage {stage} (layers {a}-{b - 1}, vLLM's split) holds no attention layer, so vLLM does not align "
              f"its {len(state)} Mamba layers' page to the {r.page_size}-token attention block there; its groups keep "
              "the default block, and the KV offloading connector refuses the mismatch."
              + (" --block-size is given, which aligns every stage." if asked else ""),
              fix="" if asked else f"pass --block-size {r.page_size} (the aligned block), or a --pipeline-parallel-size "
                                   "that leaves an attention layer on every stage",
              engine_message=F.PP_NO_ATTENTION_MESSAGE.format(block=F.default_block_size(c.derived["version"]).value,
                                                               hash=r.page_size),
              layers=state, source=F.PP_NO_ATTENTION_SOURCE + "; " + F.PP_SPLIT_SOURCE, stage="start-up")
