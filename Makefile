# One entry point per job. Each target (re)creates .venv from the pinned
# requirements only when they changed (the stamp file records that).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/python -m pip --disable-pip-version-check -qq
# torch==2.13.0 resolves to the CPU wheel (2.13.0+cpu) from PyTorch's CPU index; every other
# package still comes from PyPI. For a GPU see book/about.md ("GPU, multi-GPU and recorded runs"); without network
# access to that index (checked first) or with `make venv TORCH_INDEX=`, pip uses PyPI and the
# indexes of pip.conf only.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIP   := $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))

.PHONY: venv test test-gpu book book-student book-smoke bench data data-verify lab site-check clean help

help:
	@echo "make test   - install (if needed) and run the test suite"
	@echo "make book   - install (if needed), execute every chapter (profile=cpu), build HTML into book/_build/html"
	@echo "make book-student - the same book without the exercises' solutions, in book/_build/html-student"
	@echo "make bench  - install (if needed) and run the benchmarks (numbers -> book/_build/metrics/bench.json)"
	@echo "make bench AUTHORS=PATH - time the authors' SemanticFusion.py/.ipynb against ours on this machine"
	@echo "make test-gpu - on a GPU machine: CUDA tests + paper-profile chapters 6-8, recorded in book/recorded/ (.ci/run-gpu)"
	@echo "make data   - download the datasets into data/ (or \$$SEMLM_DATA_DIR) and check their SHA-256 (network)"
	@echo "make data-verify - check the datasets against lib/semlm/data/checksums.sha256 (no network)"
	@echo "make lab    - JupyterLab on notebooks/: the .py chapters open as notebooks (jupytext)"
	@echo "make site-check - check the built HTML in a headless browser and the chapters' code width"
	@echo "make clean  - remove book/_build (keeps .venv)"

venv: $(STAMP)

$(STAMP): requirements.txt constraints.txt pyproject.toml
	@echo ">> creating/refreshing $(VENV) from requirements.txt (pinned; torch==2.13.0 CPU)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@index="$(TORCH_PIP)"; \
	if [ -n "$$index" ] && ! $(BIN)/python -c "import urllib.request as r; r.urlopen('$(TORCH_INDEX)/torch/', timeout=10)" 2>/dev/null; then \
	  echo ">> $(TORCH_INDEX) is unreachable: torch comes from the configured indexes"; index=""; fi; \
	echo "$(PIP) install $$index -r requirements.txt -c constraints.txt"; \
	$(PIP) install $$index -r requirements.txt -c constraints.txt
	$(PIP) install --no-deps --no-build-isolation -e .
	@touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

book: $(STAMP)
	$(BIN)/python -m semlm.book run --profile cpu

book-student: $(STAMP)
	$(BIN)/python -m semlm.book run --profile cpu --no-solutions

book-smoke: $(STAMP)
	$(BIN)/python -m semlm.book run --profile smoke

# `make bench AUTHORS=path/to/SemanticFusion.py [RUNS=3]`: the authors' script (downloaded by you from
# github.com/YongchaoHuang/semantic_fusion) against ours on this machine, instead of the benchmarks.
bench: $(STAMP)
	$(BIN)/python -m semlm.bench $(if $(AUTHORS),--authors-script "$(AUTHORS)" $(if $(RUNS),--runs $(RUNS)))

# No venv: the GPU machine's own Python with .whl/ wheels (see the header of .ci/run-gpu).
test-gpu:
	bash .ci/run-gpu

data: $(STAMP)
	$(BIN)/python -m semlm.data fetch

data-verify: $(STAMP)
	$(BIN)/python -m semlm.data verify

# The chapters are py:percent files (jupytext.toml): a double click opens one as a notebook, and
# saving writes the .py back (outputs stay out of git). Run from the repository root so the
# chapters find data/ and book/_build/.
site-check: $(STAMP)
	@status=0; $(BIN)/python -m semlm.sitecheck --code-width notebooks || status=1; \
	$(BIN)/python -m semlm.sitecheck book/_build/html || status=1; exit $$status

LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings
lab: $(STAMP)
	@mkdir -p $(LAB_SETTINGS)
	@echo '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"python": "Jupytext Notebook"}}}' \
	  > $(LAB_SETTINGS)/overrides.json
	@echo ">> chapters run at profile=$${SEMLM_PROFILE:-smoke} here (SEMLM_PROFILE=cpu make lab for the book's scale)"
	SEMLM_PROFILE=$${SEMLM_PROFILE:-smoke} $(BIN)/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root)

clean:
	rm -rf book/_build
