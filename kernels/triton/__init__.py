"""Triton kernels for CUDA and Intel XPU (Triton's XPU backend), one op per file.

Each file keeps the signature of its `kernels/reference` twin, which is its test oracle. Nothing
here is imported on CPU: `registration.register_fast_ops` checks the device and that Triton
imports before it loads any kernel module, so CPU machines without Triton are unaffected.
"""
