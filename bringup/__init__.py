"""Bring-up Workbench: see README.md. Subpackages: app (Qt), core (no Qt), kernels, resources."""

import sys
from pathlib import Path

__version__ = "0.1.0"


def _drop_checkout_root() -> None:
    """Take a source checkout's root off `sys.path`.

    The checkout keeps the rooms as bare folders (core/, app/, kernels/) that pyproject maps onto
    `bringup.*`. `python -m bringup` (or `python -m pytest`) run from the root puts the root on
    sys.path, and the bare `kernels/` then shadows Hugging Face's `kernels` package, which
    transformers >= 5.25 depends on and imports ("cannot import name 'CUDAProperties' from
    'kernels'"). Our rooms are only ever reached as `bringup.*`, so nothing needs the root there.
    An installed copy has no pyproject beside it, and is left alone.
    """
    root = Path(__file__).resolve().parent.parent
    if not ((root / "pyproject.toml").is_file() and (root / "kernels" / "__init__.py").is_file()):
        return
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != root]
    for name in ("kernels", "core", "app"):  # a bare room imported before this ran
        module = sys.modules.get(name)
        if module is not None and Path(getattr(module, "__file__", None) or "/").resolve().parent.parent == root:
            del sys.modules[name]


_drop_checkout_root()
