"""Layering is one way: app -> core -> kernels. Checked on the source, so a new file can't slip by."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "core": ("PySide6", "pyqtgraph", "superqt", "qtpy", "bringup.app"),
    "kernels": ("PySide6", "pyqtgraph", "superqt", "qtpy", "bringup.app", "bringup.core"),
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_lower_layers_never_import_upper_ones(package):
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[package]):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "layering broken (app -> core -> kernels):\n" + "\n".join(bad)
