# Quickstart: `make demo` and `make test` each set up what they need first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The CPU build the tests pin; on a GPU runner the runner's own torch is used instead.
TORCH_CPU ?= torch==2.13.0

.PHONY: setup demo test test-gpu lint clean

setup: $(STAMP)

# --system-site-packages: a runner's preinstalled CUDA torch stays visible to the guard
# and to the arm environments made from this interpreter. setuptools>=70.1 builds wheels
# without the separate `wheel` package, which arm builds with --no-build-isolation need.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=70.1"
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet $(TORCH_CPU)
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

# Exit code 1 is the demo doing its job (it finds the regression); 2 is a real failure.
demo: setup
	$(VENV)/bin/guard demo --out guard-demo || test $$? -eq 1

test: setup
	$(PY) -m pytest -q

test-gpu: setup
	$(PY) -m pytest -q -m gpu

clean:
	rm -rf $(VENV) guard-demo guard-out .pytest_cache
