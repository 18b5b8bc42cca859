"""Widgets of the Diagnose tab: the general reading (failure, class, stage timeline, layers, engine source)."""
