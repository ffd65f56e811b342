# Two commands for a new machine: `make demo` and `make test`.
# Both create or reuse .venv and install what they need. Where the system Python already has a
# CUDA build of torch (GPU servers, often offline), the venv sees it instead of installing another.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.kernelevo-installed

.PHONY: demo test test-all lint doctor clean-venv

$(STAMP): pyproject.toml Makefile
	@set -e; \
	if [ ! -x $(BIN)/python ]; then \
	  if $(PYTHON) -c 'import sys, torch; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null; then \
	    echo "kernelevo: using the system's CUDA build of torch ($$($(PYTHON) -c 'import torch; print(torch.__version__)'))"; \
	    $(PYTHON) -m venv --system-site-packages $(VENV); \
	  else \
	    $(PYTHON) -m venv $(VENV); \
	  fi; \
	fi; \
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true; \
	if ! $(BIN)/python -c 'import torch' 2>/dev/null; then \
	  echo "kernelevo: installing torch 2.13.0"; \
	  $(BIN)/python -m pip install -q --disable-pip-version-check torch==2.13.0 2>&1 | grep -v 'is ignored: it is neither' || true; \
	fi; \
	echo "kernelevo: installing kernelevo and its dependencies into $(VENV)"; \
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]' 2>&1 | grep -v 'is ignored: it is neither' || true; \
	$(BIN)/python -c 'import kernelevo.sandbox, torch, triton, pydantic' ; \
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/kernelevo doctor
	@run=runs/demo-softmax-$$(date +%Y%m%d-%H%M%S); \
	$(BIN)/kernelevo optimize softmax --max-evals 9 --run-dir $$run --report; code=$$?; \
	$(BIN)/kernelevo status $$run; \
	echo "the reasoning trace: $(BIN)/kernelevo trace $$run"; \
	echo "the run as a page (open it in a browser): $$run/report.html"; exit $$code

# The tests run in TEST_WORKERS processes (pytest-xdist), each test module kept in one of them: much
# of a test's time is spent waiting on the sandboxed processes it starts, so two workers keep both
# cores of a small machine busy. TEST_WORKERS=0 runs them in this process (for a debugger), as does a
# venv without pytest-xdist (an offline machine whose install could not fetch it). On a machine with
# a GPU they run in one: the GPU tests time kernels, and a second worker's load would be in the times.
TEST_WORKERS ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo 0 || echo 2)
WORKERS = $(shell $(BIN)/python -c 'import xdist' 2>/dev/null && echo "-n $(TEST_WORKERS) --dist loadscope")

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(WORKERS) --durations=15

# Everything, the tests marked slow included (about twice as long as `make test`).
test-all: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(WORKERS) -m ""

lint: $(STAMP)
	$(BIN)/ruff check .

doctor: $(STAMP)
	$(BIN)/kernelevo doctor

clean-venv:
	rm -rf $(VENV)
