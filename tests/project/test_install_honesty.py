"""Install instructions that hold on a clean machine, and messages that name the real problem."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from bringup.core.probe.ipex_compat import ipex_mismatch

from repo_paths import REPO

ROOT = REPO


def test_ipex_mismatch_names_the_real_incompatibility():
    text = ipex_mismatch("2.8.10+xpu", "2.13.0+xpu")
    assert "built for torch 2.8" in text and "torch 2.13.0+xpu" in text and "pip uninstall" in text
    assert ipex_mismatch("2.8.10+xpu", "2.8.0+xpu") == ""  # a matching pair is fine
    assert ipex_mismatch(None, "2.13.0") == "" and ipex_mismatch("2.8.10", None) == ""


def test_no_ipex_extra_and_cpu_torch_by_default():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "ipex" not in extras and "keyring" in extras
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^TORCH_SPEC \?= torch==2\.13\.0$", make, re.M)
    assert re.search(r"^TORCH_INDEX \?= https://download\.pytorch\.org/whl/cpu$", make, re.M)
    assert "--extra-index-url $(TORCH_INDEX)" in make  # PyPI (or a local mirror) still serves the rest
    readme = (ROOT / "README.md").read_text()
    assert "Intel GPU driver" in readme and "whl/xpu" in readme and "whl/cpu" in readme
    assert ".[ipex]" not in readme


def test_the_suite_says_what_is_missing_without_the_shared_folder(tmp_path):
    """A checkout without ../shared: one clear line, no collection traceback."""
    tests = tmp_path / "checkout" / "tests"
    tests.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "conftest.py", tests / "conftest.py")
    (tests / "helpers").mkdir()
    shutil.copy(ROOT / "tests" / "helpers" / "repo_paths.py", tests / "helpers" / "repo_paths.py")
    (tests / "test_any.py").write_text("def test_nothing():\n    pass\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path / "checkout")
    text = out.stdout + out.stderr
    assert out.returncode == 4, text
    assert f"{tmp_path / 'shared' / 'models'}, which is missing" in text
    assert "Traceback" not in text
