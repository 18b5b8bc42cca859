"""A wheel must carry every subpackage: pyproject lists them by hand (the folders are mapped)."""

import tomllib
from pathlib import Path

from repo_paths import REPO

ROOT = REPO
MAPPING = {"bringup": "bringup", "bringup.app": "app", "bringup.core": "core", "bringup.kernels": "kernels",
           "bringup.resources": "resources"}


def test_every_folder_with_init_is_a_listed_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == MAPPING
    found = set()
    for package, folder in MAPPING.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]) if rel.parts else package)
    assert found == set(config["packages"])
