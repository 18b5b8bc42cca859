"""`bringup bench`: the embedded engine against transformers' `generate` on the same checkpoint and workload."""
