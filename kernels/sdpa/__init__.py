"""Ops built on torch's fused scaled_dot_product_attention (flash / memory-efficient kernels)."""
