"""A wheel (non-editable install) must carry every resource file: each one matches its package's package-data."""

import fnmatch
import tomllib
from pathlib import Path

from repo_paths import REPO

ROOT = REPO


def test_every_resource_file_is_package_data():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = setuptools["package-data"]
    missing = []
    for path in sorted((ROOT / "resources").rglob("*")):
        if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(ROOT / "resources")
        package = ".".join(["bringup.resources", *rel.parent.parts])
        assert package in setuptools["packages"], f"resources/{rel.parent} holds data but {package} is not in [tool.setuptools] packages"
        if not any(fnmatch.fnmatch(rel.name, g) for g in globs.get(package, [])):
            missing.append(str(rel))
    assert not missing, f"not in the wheel (add to [tool.setuptools.package-data]): {missing}"
