"""Model implementations of the embedded engine."""
