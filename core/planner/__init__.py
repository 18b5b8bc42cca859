"""Memory planner: weights, KV pool, state pool and capacity on one device, for our embedded engine
(which sizes its pools with this same code) and for SGLang (its formulas, per version)."""

from .plan import parse_target, plan_memory
from bringup.core.layermap.sizes import format_bytes, parse_size
from .memory_plan import Capacity, MemoryPlan, Segment, StagePlan

__all__ = ["plan_memory", "parse_target", "parse_size", "format_bytes", "MemoryPlan", "Capacity", "Segment", "StagePlan"]
