"""What an SGLang start-up log says about its pools, to set a plan beside it.

SGLang prints (model_runner / kv_cache_configurator, 0.5.x):
  Load weight begin. avail mem=15.33 GB
  Load weight end. type=..., avail mem=13.81 GB, mem usage=1.52 GB.
  Mamba Cache is allocated. max_mamba_cache_size: 85292, conv_state size: 4.88GB, ssm_state size: 0.00GB
  KV Cache is allocated. #tokens: 473854, K size: 2.71 GB, V size: 2.71 GB
  max_total_num_tokens=473854, chunked_prefill_size=..., max_running_requests=8, ...
"GB" there is GiB (SGLang divides by 1 << 30).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GIB = 1024**3
_PATTERNS = {
    "free_before_load": re.compile(r"Load weight begin\. avail mem=([\d.]+) GB"),
    "free_after_load": re.compile(r"Load weight end\..*?avail mem=([\d.]+) GB"),
    "weights": re.compile(r"Load weight end\..*?mem usage=([\d.]+) GB"),
    "mamba_slots": re.compile(r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+)"),
    "kv_tokens": re.compile(r"KV Cache is allocated\..*?#tokens: (\d+)"),
    "max_total_num_tokens": re.compile(r"max_total_num_tokens=(\d+)"),
    "max_running_requests": re.compile(r"max_running_requests=(\d+)"),
    "chunked_prefill_size": re.compile(r"chunked_prefill_size=(-?\d+)"),
}


@dataclass
class StartupFigures:
    free_before_load: int | None = None  # bytes
    free_after_load: int | None = None
    weights: int | None = None
    mamba_slots: int | None = None
    kv_tokens: int | None = None
    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None

    @property
    def loaded_from(self) -> int | None:
        """Free memory before the weights loaded (logged, or after-load free + weights)."""
        if self.free_before_load is not None:
            return self.free_before_load
        if self.free_after_load is not None and self.weights is not None:
            return self.free_after_load + self.weights
        return None


def parse_startup_log(text: str) -> StartupFigures:
    """The first value of each figure in the log (TP0's, when ranks repeat them)."""
    out = StartupFigures()
    for name, pattern in _PATTERNS.items():
        m = pattern.search(text)
        if m:
            value = m.group(1)
            setattr(out, name, int(float(value) * GIB) if name in ("free_before_load", "free_after_load", "weights")
                    else int(value))
    return out


def compare(plan, log: StartupFigures) -> list[dict]:
    """Planned vs logged figures, for each figure the log has: name, planned, logged, difference."""
    rows = []
    for name, planned, logged in (("KV tokens", plan.kv_tokens, log.kv_tokens),
                                  ("mamba slots", plan.state_slots if plan.state_layers else None, log.mamba_slots),
                                  ("max running requests", plan.max_running_requests, log.max_running_requests)):
        if planned is None or logged is None:
            continue
        diff = (planned - logged) / logged if logged else 0.0
        rows.append({"figure": name, "planned": planned, "logged": logged, "difference": round(diff, 4)})
    return rows


def comparison_text(rows: list[dict]) -> str:
    out = ["", "  planned vs the start-up log"]
    for r in rows:
        out.append(f"    {r['figure']:22} {r['planned']:>12,} vs {r['logged']:>12,}  ({r['difference']:+.1%})")
    return "\n".join(out) + "\n"
