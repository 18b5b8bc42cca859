"""Damaged real configs through everything `inspect`, `validate` and `plan` run before a launch:
each is refused with a message that names a config field, or it maps, validates (with findings or
without) and plans without a traceback; one that validates breaks none of the constraints the
engine's modules assume (the geometry checks of core/layermap/constraints.py, which the engine
applies again at build time). Serving what validates is proved at small sizes by
tests/core/engine/test_engine_config_fuzz.py."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bringup.core.errors import UserError
from bringup.core.families import build_layer_map
from bringup.core.layermap.constraints import map_problems
from bringup.core.planner import plan_memory
from bringup.core.rules import LaunchSettings
from bringup.core.validate import validate

from config_fuzz import damaged_config

GIB = 1 << 30


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_config(), st.sampled_from(["embedded", "sglang", "vllm"]))
def test_a_damaged_config_is_refused_naming_a_field_or_validates_and_plans(case, target):
    name, cfg = case
    try:
        layer_map = build_layer_map(cfg, name=name)
    except UserError as err:
        assert "config" in str(err) or "field" in str(err), str(err)
        return
    result = validate(layer_map, target, LaunchSettings(device="cpu"), device_memory=64 * GIB)
    assert all(f.message for f in result.findings)
    if target == "embedded" and result.ok:
        assert map_problems(layer_map) == [], [p.field for p in map_problems(layer_map)]
    plan_memory(layer_map, device_memory=64 * GIB, target=target)
