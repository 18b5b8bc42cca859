"""Bring-up Workbench: see README.md. Subpackages: app (Qt), core (no Qt), kernels, resources."""

__version__ = "0.1.0"
