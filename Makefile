# Thin wrappers. The two commands of the README:  `make book`  and  `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU build by default (on this project's machines pip finds a local CPU wheel of 2.13.0).
# For a GPU: make setup TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126"
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
# Pytest arguments for `make test`; nbval re-executes every notebook and compares the checked cells.
TEST_ARGS ?= tests notebooks --nbval-lax

.PHONY: setup book test figures pages bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet -e ".[book,test]"
	$(BIN)/python -c "import torch, softmax_icl; print('installed softmax_icl', softmax_icl.__version__, 'with torch', torch.__version__)"
	touch $(STAMP)

## Execute every notebook at the default profile (papermill), regenerate the pages, render the HTML.
book: setup
	$(BIN)/softmax-icl build

## Unit tests + nbval over every notebook, with a fresh result cache and records written outside the repo.
test: setup
	@tmp=$$(mktemp -d); \
	SOFTMAX_ICL_CACHE_DIR=$$tmp/cache SOFTMAX_ICL_OUTPUT_DIR=$$tmp/output SOFTMAX_ICL_PROGRESS=0 \
	$(BIN)/python -m pytest $(TEST_ARGS); status=$$?; rm -rf $$tmp; exit $$status

## Notebooks only (no HTML).
figures: setup
	$(BIN)/softmax-icl build --skip-html

pages: setup
	$(BIN)/softmax-icl pages

bench: setup
	$(BIN)/python benchmarks/sweep_throughput.py

clean:
	rm -rf _build runs
