# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch comes from PyTorch's own index for the device: CPU by default (a small wheel, no CUDA
# libraries). For Intel GPUs: TORCH_INDEX=https://download.pytorch.org/whl/xpu (install the Intel
# GPU driver first, see README); for NVIDIA: the CUDA index that pytorch.org/get-started/locally
# names for your driver, e.g. TORCH_INDEX=https://download.pytorch.org/whl/cu130.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# --extra-index-url, not --index-url: the rest of torch's dependencies still come from PyPI, and
# pip prefers the index's local build (2.13.0+cpu) over PyPI's plain 2.13.0 (a CUDA build on Linux).
TORCH_PIP := $(PY) -m pip install -q $(TORCH_SPEC) $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
STAMP := $(VENV)/.installed

.PHONY: run test bench clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# An unreachable index is skipped fast on the first try (a mirror or wheelhouse may serve
	@# torch); the second try waits for a slow network.
	$(PY) -c "import torch" 2>/dev/null || $(TORCH_PIP) --retries 0 --timeout 15 || $(TORCH_PIP)
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/bringup gui

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q

bench: $(STAMP)
	$(PY) bench/inspect_startup.py

clean-venv:
	rm -rf $(VENV)
