"""Layering is one way: app -> core -> kernels; core never imports Qt; sources never import the engine.

The contracts live in pyproject.toml ([tool.importlinter]) and are checked here by import-linter,
as napari does. The `bringup` package maps its subpackages onto top-level folders (app/, core/,
kernels/: pyproject's package-dir), which import-linter cannot follow, so the check runs on a tree
of links that looks like the installed package.
"""

import subprocess
import sys
from pathlib import Path

from repo_paths import REPO

ROOT = REPO
RUN = ("import sys; from importlinter.cli import lint_imports; "
       "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True))")


def _package_tree(where: Path, pyproject: str) -> Path:
    package = where / "bringup"
    package.mkdir()
    for path in (ROOT / "bringup").glob("*.py"):
        (package / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    for sub in ("app", "core", "kernels", "resources"):
        (package / sub).symlink_to(ROOT / sub, target_is_directory=True)
    (where / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return where


def _lint(where: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN], cwd=where, env={"PYTHONPATH": str(where), "PATH": ""},
                          capture_output=True, text=True, timeout=120)


def test_import_contracts_are_kept(tmp_path):
    done = _lint(_package_tree(tmp_path, (ROOT / "pyproject.toml").read_text(encoding="utf-8")))
    assert done.returncode == 0, "layering broken (pyproject.toml [tool.importlinter]):\n" + done.stdout + done.stderr
    assert "7 kept, 0 broken" in done.stdout, done.stdout


def test_a_broken_contract_is_caught(tmp_path):
    """The check sees inside the linked folders: a contract the code breaks fails."""
    broken = (ROOT / "pyproject.toml").read_text(encoding="utf-8") + (
        '\n[[tool.importlinter.contracts]]\nname = "app never uses the layer-map vocabulary"\ntype = "forbidden"\n'
        'source_modules = ["bringup.app.layermap"]\nforbidden_modules = ["bringup.core.layermap"]\n')
    done = _lint(_package_tree(tmp_path, broken))
    assert done.returncode != 0 and "bringup.app.layermap is not allowed to import bringup.core.layermap" in done.stdout
