# attn-book: `make book` builds the book, `make test` runs the tests (each sets up .venv itself).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test lint book chapter clean
.DEFAULT_GOAL := book

# The environment: created when missing, reinstalled when the pins or the project change.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[test,book,distributed]"
	@touch $(STAMP)

venv: $(STAMP)

include mk/book.mk

# The lint and the type check ([tool.ruff], [tool.mypy] in pyproject.toml); make test runs them
# first, so that a finding fails it fast.
lint: $(STAMP)
	$(VENV)/bin/ruff check attn_lib tests benchmarks scripts
	$(VENV)/bin/mypy

test: lint
	$(MAKE) --no-print-directory book PROFILE=quick
	$(PY) -m pytest
