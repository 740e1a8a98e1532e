# Quick start: `make run` (virtualenv, install, fetch + cache the default model, answer the public set)
# and `make test`. PYTHON picks the interpreter the virtualenv is made from.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test install bench indexes clean

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

# The indexes shipped in indexes/ (the default catalog for the default models' vocabularies), compiled again
# by this compiler: needed whenever core/indexfile.py's GRAMMAR_REVISION changes (tests/test_indexfile.py
# compares them with a fresh compile).
indexes: $(VENV)/.installed
	$(BIN)/callmaybe compile schemas/functions_definition.json --tokenizer Qwen/Qwen3-0.6B -o indexes
	$(BIN)/callmaybe compile schemas/functions_definition.json --tokenizer smollm2-135m-instruct -o indexes

clean:
	rm -rf $(VENV) data/output build *.egg-info
