"""Validate: a launch checked before it runs. It composes the launch rules (core/rules/), the memory plan
(core/planner/) and the launch command (core/launch/), so it sits above all three.

    from bringup.core.validate import validate
    result = validate(layer_map, "sglang==0.5.17", LaunchSettings(device="xpu"))
    result.ok, result.resolved, result.findings, result.command (result.launch: what Run starts)
"""

from bringup.core.validate.matrix import Matrix, compatibility_matrix
from bringup.core.validate.validate import ValidationResult, validate

__all__ = ["Matrix", "ValidationResult", "compatibility_matrix", "validate"]
