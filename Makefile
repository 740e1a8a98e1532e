# Quick start: `make run` (virtualenv, install, fetch + cache the default model, answer the public set)
# and `make test`. PYTHON picks the interpreter the virtualenv is made from.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test install bench clean

run: $(VENV)/.installed
	$(BIN)/callmaybe run

test: $(VENV)/.installed
	CI=$${CI:-} $(BIN)/python -m pytest -q

install: $(VENV)/.installed

# torch==2.13.0 first: that pin takes the CPU build from the local wheel folder; an unpinned torch
# would pull a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

bench: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/compile_bench.py

clean:
	rm -rf $(VENV) data/output build *.egg-info
