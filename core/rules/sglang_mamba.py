"""SGLang's mamba radix cache strategies: auto resolution and validation (notes §3).

`--mamba-radix-cache-strategy {auto, no_buffer, extra_buffer, extra_buffer_lazy}` only matters while
the radix cache is on. Auto picks extra_buffer when the overlap schedule is wanted (or page_size > 1)
and the model and platform support it, else no_buffer with the overlap schedule switched off.
"""

from __future__ import annotations

from bringup.core.rules import messages as msg
from bringup.core.rules import sglang_archs as archs
from bringup.core.rules import sglang_backends as backends
from bringup.core.rules.check import Check
from bringup.core.rules.profiles import versions_where

FLA_CHUNK_SIZE = 64
TRACK_INTERVAL = 256  # --mamba-track-interval default
XPU_RECIPE = "--attention-backend intel_xpu --disable-radix-cache"


def supports_extra_buffer(c: Check) -> bool:
    """`supports_mamba_cache_extra_buffer()` of the profile's release (the arch gate, not the platform gate)."""
    p = c.profile
    if not archs.extra_buffer_arch(c.m):
        return False
    if p.extra_buffer_refused_on_xpu and c.s.device == "xpu":
        return False
    if p.extra_buffer_needs_triton_linear_backend and (c.s.linear_attn_backend or "triton") != "triton":
        return False
    return True


def slots_per_request(strategy: str | None, radix: bool, overlap: bool) -> int:
    """SGLang's mamba_ratio: state slots held per running request (notes §2.5)."""
    if not radix or strategy is None:
        return 1
    if strategy == "extra_buffer":
        return 3 + (2 if overlap else 1)
    if strategy == "extra_buffer_lazy":
        return 4
    return 3


def check_mamba_strategy(c: Check) -> None:
    s, r, m, p = c.s, c.r, c.m, c.profile
    strategy = s.mamba_strategy
    where = p.where
    if not archs.uses_mamba_radix_cache(m):
        r.mamba_radix_cache, r.mamba_strategy = False, None
        # An arch SGLang lacks never builds its pools: no slot count to predict.
        r.state_slots_per_request = 1 if m.is_hybrid and not archs.not_implemented(m) else None
        if strategy in ("extra_buffer", "extra_buffer_lazy"):
            text = msg.STRATEGY_NEEDS_MAMBA.format(strategy=strategy, arch=m.architecture)
            if p.rejects_strategy_without_mamba:
                c.add("MAMBA_STRATEGY_WITHOUT_MAMBA", "error",
                      f"--mamba-radix-cache-strategy {strategy} asks for mamba state snapshots, but {m.architecture} "
                      "does not route through SGLang's mamba radix cache.",
                      fix="drop --mamba-radix-cache-strategy", engine_message=text,
                      source=f"{p.source('rejects_strategy_without_mamba')}; issue #39430", stage="arguments")
            else:
                c.add("MAMBA_STRATEGY_WITHOUT_MAMBA", "warning",
                      f"--mamba-radix-cache-strategy {strategy} on {m.architecture}, which has no mamba radix cache: "
                      f"issue #39430 reports a crash at the first decode; {c.version} does not reject it at start-up "
                      f"(sglang {versions_where(lambda q: q.rejects_strategy_without_mamba)} does).",
                      fix="drop --mamba-radix-cache-strategy", engine_message=msg.NONE_SUBSCRIPT,
                      source=f"issue #39430; {p.source('rejects_strategy_without_mamba')}", stage="first decode")
        elif strategy == "no_buffer":
            c.add("MAMBA_STRATEGY_IGNORED", "info",
                  f"{m.architecture} has no mamba radix cache in SGLang, so --mamba-radix-cache-strategy is ignored.",
                  fix="drop --mamba-radix-cache-strategy", source=where)
        return
    if s.disable_radix_cache:
        r.mamba_radix_cache, r.mamba_strategy, r.state_slots_per_request = False, None, 1
        r.why["mamba_strategy"] = "--disable-radix-cache: no prefix caching of state, one slot per request"
        if strategy != "auto":
            c.add("MAMBA_STRATEGY_IGNORED", "info",
                  f"With --disable-radix-cache the strategy {strategy} is meaningless (maintainers in issue #27418); "
                  "state is not cached across requests; every release from 0.5.17 skips the strategy checks then.",
                  fix="drop --mamba-radix-cache-strategy", source=f"issue #27418; {p.source('auto_strategy_rule')}")
        return
    r.mamba_radix_cache = True
    if strategy == "auto":
        wants_eb = r.overlap_schedule or (s.page_size or 1) > 1
        reason = "the overlap schedule is on" if r.overlap_schedule else f"page_size={s.page_size} > 1"
        if wants_eb and supports_extra_buffer(c):
            strategy = "extra_buffer"
            why = f"auto -> extra_buffer: {reason} and {m.architecture} supports extra_buffer in {c.version}"
        else:
            strategy = "no_buffer"
            r.overlap_schedule = False
            if not wants_eb:
                why = "auto -> no_buffer: overlap schedule off and page_size 1"
            elif not archs.extra_buffer_arch(m):
                why = f"auto -> no_buffer (overlap schedule switched off): {m.architecture} is not an extra_buffer architecture"
            elif c.s.device == "xpu" and p.extra_buffer_refused_on_xpu:
                why = f"auto -> no_buffer (overlap schedule switched off): {c.version} refuses extra_buffer on XPU"
            else:
                why = "auto -> no_buffer (overlap schedule switched off): --linear-attn-backend is not triton"
        r.why["mamba_strategy"] = why
        c.add("MAMBA_AUTO_RESOLVED", "info", f"Mamba radix cache strategy: {why}.",
              source=f"{p.source('auto_strategy_rule')}; {p.source('extra_buffer_refused_on_xpu')}")
    else:
        r.why["mamba_strategy"] = f"--mamba-radix-cache-strategy {strategy}"
    r.mamba_strategy = strategy
    if strategy == "no_buffer":
        _validate_no_buffer(c)
    else:
        _validate_extra_buffer(c, strategy)


def check_state_slots(c: Check) -> None:
    """At memory-pool sizing, with the overlap schedule as finally resolved: slots per request, and
    extra_buffer_lazy's need for the overlap schedule."""
    r = c.r
    if not r.mamba_radix_cache:
        return
    if r.mamba_strategy == "extra_buffer_lazy" and not r.overlap_schedule:
        why = "--pp-size > 1 switched it off" if c.s.pp > 1 and not c.s.disable_overlap_schedule else "it is off"
        c.add("LAZY_NEEDS_OVERLAP", "error", "extra_buffer_lazy allocates its second track slot on demand and needs "
              f"the overlap schedule, but {why}.", fix="use extra_buffer (or drop --disable-overlap-schedule)",
              engine_message="AssertionError: " + c.profile.lazy_overlap_message,
              source=f"{c.profile.source('lazy_overlap_message')} (_calculate_mamba_ratio); PR #27118",
              stage="start-up (memory pool sizing)")
    r.state_slots_per_request = slots_per_request(r.mamba_strategy, True, r.overlap_schedule)


def _xpu_extra_buffer_versions() -> str:
    """The releases where extra_buffer passes both gates on XPU (PR #32227 until 0.5.20's refusal)."""
    return versions_where(lambda q: "xpu" in q.extra_buffer_platforms and not q.extra_buffer_refused_on_xpu)


def _no_buffer_recipe() -> str:
    return "--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule"


def _validate_no_buffer(c: Check) -> None:
    s, r, p = c.s, c.r, c.profile
    page_msg, overlap_msg, trtllm_msg = (f"AssertionError: {t}" for t in p.no_buffer_messages)
    where = p.source("no_buffer_messages")
    if (s.page_size or 1) != 1:
        c.add("NO_BUFFER_PAGE_SIZE", "error",
              f"no_buffer caches state per token, so it needs page_size 1; --page-size {s.page_size} is refused.",
              fix="use --disable-radix-cache (keeps the page size), or drop --page-size",
              engine_message=page_msg, source=f"{where} (validate_mamba_no_buffer)", stage="arguments")
    if r.overlap_schedule:
        c.add("NO_BUFFER_OVERLAP", "error",
              "no_buffer cannot run with the overlap scheduler, and an explicit no_buffer does not switch it off.",
              fix="add --disable-overlap-schedule (or use --disable-radix-cache)",
              engine_message=overlap_msg, source=f"{where} (validate_mamba_no_buffer); PR #29158 review",
              stage="arguments")
    # A model override's pick is already in place here (found by the oracle: NemotronH's trtllm_mha on Blackwell
    # from 0.5.19); the general default is not.
    picked = None if s.attention_backend else backends.override_backend(c.m, s, p.label)
    if (s.attention_backend or (picked and picked[0])) == "trtllm_mha":
        by = f", which {c.m.architecture}'s own override picks here ({picked[1]}, sglang {p.label})" if picked else ""
        c.add("NO_BUFFER_TRTLLM", "error", f"no_buffer does not work with the trtllm_mha attention backend{by}.",
              fix="use --mamba-radix-cache-strategy extra_buffer, or --disable-radix-cache"
                  + (", or pass another backend (--attention-backend flashinfer)" if picked else ""),
              engine_message=trtllm_msg, source=f"{where} (validate_mamba_no_buffer); issue #27418",
              stage="arguments")


def _validate_extra_buffer(c: Check, strategy: str) -> None:
    s, m, p = c.s, c.m, c.profile
    where = p.where
    auto = s.mamba_strategy == "auto"
    picked = "auto picked extra_buffer, then " if auto else ""
    recipe = XPU_RECIPE if s.device == "xpu" else "--disable-radix-cache"
    xpu_ok = _xpu_extra_buffer_versions()
    if not supports_extra_buffer(c):
        if s.device == "xpu" and p.extra_buffer_refused_on_xpu and archs.extra_buffer_arch(m):
            why = (f"{c.version} refuses extra_buffer on XPU (supports_mamba_cache_extra_buffer() is False there; "
                   f"only sglang {xpu_ok} allow it on XPU)")
            fix = f"use {_no_buffer_recipe()} (what auto picks on XPU in sglang " \
                  f"{versions_where(lambda q: q.extra_buffer_refused_on_xpu)}), or {recipe}"
            source = p.source("extra_buffer_refused_on_xpu")
        elif archs.extra_buffer_arch(m):
            why = "extra_buffer needs --linear-attn-backend triton"
            fix = f"use --linear-attn-backend triton, or {_no_buffer_recipe()}, or {recipe}"
            source = p.source("extra_buffer_needs_triton_linear_backend")
        else:
            why = f"{m.architecture} is not in SGLang's extra_buffer architecture list"
            fix = f"use {_no_buffer_recipe()}, or {recipe}"
            source = p.source("extra_buffer_refused_on_xpu")
        c.add("EXTRA_BUFFER_UNSUPPORTED", "error", f"{strategy}: {why}.", fix=fix,
              engine_message="AssertionError: " + p.extra_buffer_arch_message.format(arch=m.architecture),
              source=f"{source} (supports_mamba_cache_extra_buffer, asserted in validate_mamba_extra_buffer)",
              stage="arguments")
    elif s.device not in p.extra_buffer_platforms:
        ok = "/".join(d.upper() if d != "rocm" else "ROCm" for d in p.extra_buffer_platforms)
        if s.device == "xpu":
            fix = (f"use {recipe}, or {_no_buffer_recipe()}; only sglang {xpu_ok} run extra_buffer on XPU "
                   "(PR #32227 added XPU to the gate; later releases refuse extra_buffer on XPU again)")
        else:
            fix = f"use {recipe} (or {_no_buffer_recipe()})"
        c.add("EXTRA_BUFFER_PLATFORM", "error",
              f"{picked}the platform gate refused it: extra_buffer snapshots state with flash-linear-attention "
              f"kernels, and {c.version} allows them only on {ok}, not on {s.device}.", fix=fix,
              engine_message=msg.EXTRA_BUFFER_PLATFORM.format(text=p.extra_buffer_platform_message),
              source=f"{p.source('extra_buffer_platform_message')} (validate_mamba_extra_buffer); PR #32227",
              stage="arguments")
    page = s.page_size
    if page is not None and page > 1:
        if TRACK_INTERVAL % page:
            c.add("EXTRA_BUFFER_TRACK_INTERVAL", "error",
                  f"--mamba-track-interval ({TRACK_INTERVAL}) must be a multiple of page_size {page}: state snapshots "
                  "land on page boundaries.", fix="use a power-of-two page size up to 256",
                  engine_message=msg.TRACK_INTERVAL, source=f"{where} (validate_mamba_extra_buffer)", stage="arguments")
        chunk = m.mamba_chunk_size or FLA_CHUNK_SIZE
        if chunk % page and page % chunk:
            c.add("EXTRA_BUFFER_CHUNK_PAGE", "error",
                  f"The model's mamba chunk size {chunk} and page_size {page} must divide one another, or state "
                  "snapshots cannot line up with both.", fix=f"use a page size that divides {chunk} or is a multiple of it",
                  engine_message=msg.CHUNK_PAGE.format(chunk=chunk, page=page),
                  source=f"{where} (mamba_cache_chunk_size)", stage="arguments")
