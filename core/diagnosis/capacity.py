"""A cap the log does not say out loud: SGLang limits running requests to max_mamba_cache_size //
mamba_ratio, and releases before the "capped ... by the mamba state cache" warning do it silently
(and /get_server_info shows only the result). From the pool size and the limit the log does print,
this names the real cap and why."""

from __future__ import annotations

from bringup.core.finding import Finding

SOURCE = "sglang resolve_max_num_reqs / _calculate_mamba_ratio (sglang-notes §2.5)"


def _ratios(facts: dict) -> tuple[int, ...]:
    """Slots one running request holds, as the launch's strategy sets it (all candidates when unknown)."""
    if facts.get("disable_radix_cache") is True:
        return ()
    strategy = facts.get("mamba_radix_cache_strategy")
    if strategy == "no_buffer":
        return (3, 2)  # 2 with SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK
    if strategy == "extra_buffer_lazy":
        return (4,)
    if strategy == "extra_buffer":
        return (4,) if facts.get("disable_overlap_schedule") is True else (5,)
    return (2, 3, 4, 5)


def state_cap(facts: dict, findings: list[Finding], state_layers: tuple[int, ...] = ()) -> Finding | None:
    """A warning when the running limit the log prints is the state pool's cap, unless the log said so itself."""
    slots, running = facts.get("mamba_cache_size"), facts.get("running_limit")
    if not isinstance(slots, int) or not isinstance(running, int) or slots <= 0 or running <= 0:
        return None
    if any(f.code in ("MAX_RUNNING_CAPPED_BY_STATE", "MAX_RUNNING_REDUCED") for f in findings):
        return None
    # With the radix cache off (1 slot per request) the pool may simply be sized to the limit; only a
    # division by a ratio above 1 is certainly the state pool capping it.
    ratio = next((r for r in _ratios(facts) if r > 1 and slots // r == running), None)
    if ratio is None:
        return None
    return Finding(
        kind="log", code="STATE_CAPS_RUNNING", severity="warning",
        title=f"Concurrency capped at {running} by the mamba state cache",
        explanation=(f"The state pool has {slots} slots and each running request holds {ratio}, so at most "
                     f"{running} requests run at once ({slots} // {ratio}), whatever the KV cache could hold. This "
                     "SGLang printed no warning about it, and /get_server_info shows only the limit."),
        fix=("Raise --mamba-full-memory-ratio or --max-mamba-cache-size, halve the state with --mamba-ssm-dtype "
             "bfloat16, or use --disable-radix-cache (1 slot per request)."),
        engine="sglang", source=SOURCE, layers=tuple(state_layers),
        details={"slots": slots, "ratio": ratio, "running": running},
    )
