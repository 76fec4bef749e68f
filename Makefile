# Two commands for a fresh machine: `make demo` (the main job on the bundled sample corpus,
# SQLite under .mmdedup) and `make test` (the test suite). Both create .venv on first use.
VENV ?= .venv
STORE ?= .mmdedup
PYTHON ?= python3
BIN = $(VENV)/bin

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[ml,multilingual,ray,test]'
	touch $@

setup: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/mmdedup --home $(STORE) ingest samples/corpus/manifest.jsonl
	$(BIN)/mmdedup --home $(STORE) clusters
	$(BIN)/mmdedup --home $(STORE) pairs --min-tier weak
	@echo
	@echo "mmdedup is installed in $(VENV), not on your PATH: run $(BIN)/mmdedup --home $(STORE) pairs,"
	@echo "or 'source $(BIN)/activate' first, and then mmdedup --home $(STORE) pairs."

test: $(VENV)/.installed
	$(BIN)/python -m pytest

# The report test renders the report in a real browser, Debian's chromium (outside CI it
# is skipped without one), with a CJK font so Chinese text is drawn, not boxes. Installing
# them needs root and apt-get; CI runs this first.
chromium:
	@{ command -v chromium && fc-list | grep -qi wqy; } >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-zenhei >/dev/null; }

.PHONY: setup demo test chromium
