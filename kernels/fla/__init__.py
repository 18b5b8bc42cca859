"""Wrappers that run our ops through flash-linear-attention (`fla`) on CUDA and XPU.

Imported only after `bringup.kernels.triton.availability.fla_reason` found `fla` importable.
"""
