"""Launch rules: what an engine (ours, SGLang by release, vLLM) accepts, predicted before the launch.
Validate (core/validate/) composes them with the memory plan and the launch command.

One module per topic: `sglang_mamba` (radix cache strategies), `sglang_attention` + `sglang_backends`
(backends, defaults, page sizes, layer-0 probes), `parallel` (TP/PP), `dtypes`, `embedded` (our
engine), `vllm`; `profiles` holds what changed between SGLang releases, as data.
"""

from bringup.core.finding import Finding
from bringup.core.rules.settings import LaunchSettings, Resolved
from bringup.core.rules.targets import Target, known_targets, parse_target

__all__ = ["Finding", "LaunchSettings", "Resolved", "Target", "known_targets", "parse_target"]
