"""Fixtures shared across test modules."""

from server_helpers import server  # noqa: F401 - one `bringup serve` for every server test module
