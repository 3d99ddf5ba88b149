# One entry point per job. Each target (re)creates .venv from the pinned
# requirements only when they changed (the stamp file records that).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/python -m pip --disable-pip-version-check -qq

.PHONY: venv test book book-smoke bench clean help

help:
	@echo "make test   - install (if needed) and run the test suite"
	@echo "make book   - install (if needed), execute every chapter (profile=cpu), build HTML into book/_build/html"
	@echo "make bench  - install (if needed) and run the benchmarks (numbers -> book/_build/metrics/bench.json)"
	@echo "make clean  - remove book/_build (keeps .venv)"

venv: $(STAMP)

$(STAMP): requirements.txt constraints.txt pyproject.toml
	@echo ">> creating/refreshing $(VENV) from requirements.txt (pinned; torch==2.13.0 CPU)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -r requirements.txt -c constraints.txt
	$(PIP) install --no-deps --no-build-isolation -e .
	@touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

book: $(STAMP)
	$(BIN)/python -m semlm.book run --profile cpu

book-smoke: $(STAMP)
	$(BIN)/python -m semlm.book run --profile smoke

bench: $(STAMP)
	$(BIN)/python -m semlm.bench

clean:
	rm -rf book/_build
