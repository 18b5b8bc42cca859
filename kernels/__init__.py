"""Compute kernels: a plain-torch reference for each op, faster versions per device, and dispatch."""
