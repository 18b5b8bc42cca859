# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU build by default; see README for XPU and CUDA (e.g. TORCH_SPEC="torch --index-url ...").
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: run test bench clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_SPEC)
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
