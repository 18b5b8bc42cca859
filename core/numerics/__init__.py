"""Bring-up numerics: each block's output on a device against the reference (compare), and each
kernel against its plain reference (check-kernels). The work runs in child processes."""
