"""Launch rules: what an engine (ours, or SGLang by release) accepts, predicted before the launch.

    from bringup.core.rules import LaunchSettings, validate, compatibility_matrix
    result = validate(layer_map, "sglang==0.5.17", LaunchSettings(device="xpu"))
    result.ok, result.resolved, result.findings, result.command (result.launch: what Run starts)

One module per topic: `sglang_mamba` (radix cache strategies), `sglang_attention` + `sglang_backends`
(backends, defaults, page sizes, layer-0 probes), `parallel` (TP/PP), `dtypes`, `embedded` (our
engine); `profiles` holds what changed between SGLang releases, as data.
"""

from bringup.core.finding import Finding
from bringup.core.rules.matrix import Matrix, compatibility_matrix
from bringup.core.rules.settings import LaunchSettings, Resolved
from bringup.core.rules.targets import Target, known_targets, parse_target
from bringup.core.rules.validate import ValidationResult, validate

__all__ = ["Finding", "LaunchSettings", "Matrix", "Resolved", "Target", "ValidationResult", "compatibility_matrix",
           "known_targets", "parse_target", "validate"]
