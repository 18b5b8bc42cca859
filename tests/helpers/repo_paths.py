"""Where things are, for every test wherever its folder: the checkout, the shared folder beside it, test data."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # tests/helpers/ -> the checkout
TESTS = REPO / "tests"
DATA = TESTS / "data"
SHARED = REPO.parent / "shared"
SHARED_MODELS = SHARED / "models"  # real configs, read in place
NANO_CONFIG = SHARED_MODELS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B.json"
