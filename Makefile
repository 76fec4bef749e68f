# Two commands for a fresh machine: `make demo` (the main job on the bundled sample corpus,
# SQLite under .mmdedup) and `make test` (the test suite). Both create .venv on first use.
VENV ?= .venv
STORE ?= .mmdedup
PYTHON ?= python3
BIN = $(VENV)/bin

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[ml,test]'
	touch $@

setup: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/mmdedup --home $(STORE) ingest samples/corpus/manifest.jsonl
	$(BIN)/mmdedup --home $(STORE) clusters
	$(BIN)/mmdedup --home $(STORE) pairs --min-tier weak

test: $(VENV)/.installed
	$(BIN)/python -m pytest

.PHONY: setup demo test
