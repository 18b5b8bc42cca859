"""Everything without Qt: model specs and layer maps, probe, rules, planner, diagnosis, engine."""
