# Thin wrappers. The two commands of the README:  `make book`  and  `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU build by default (on this project's machines pip finds a local CPU wheel of 2.13.0).
# For a GPU: make setup TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126"
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
# `make test`: unit tests once (UNIT_ARGS), then for each numerical backend (BACKENDS: the fused CPU kernel, PyTorch)
# nbval re-executes every notebook (NB_ARGS; it compares the verdict lines only) with a fresh result cache and records
# written outside the repo, and tests/test_regression.py holds those fresh records against book/results within the
# declared tolerances (verdicts exactly). The C engines are compiled once first, in two processes at once (paper 1's
# takes about a minute of one core, paper 2's seven seconds), and their libraries copied into each pass's fresh cache:
# a build product keyed by its sources, compiler, flags and CPU, not a result (without this, the test processes of
# each pass compiled them again, side by side).
UNIT_ARGS ?= tests
NB_ARGS ?= --nbval-lax --nbval-sanitize-with notebooks/nbval_sanitize.cfg
# Test processes at once (pytest-xdist): each takes whole test files or whole notebooks (--dist loadfile) and an even
# share of the cores as its thread count (OMP_NUM_THREADS, unless you set it); no number depends on the thread count
# in the engines, and the PyTorch path's rounding stays within the regression tolerances. TEST_WORKERS=1: one process.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(os.cpu_count() or 1)")
XDIST := $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
WORKER_THREADS := $(shell $(PYTHON) -c "import os; print(max(1, (os.cpu_count() or 1) // max(1, int('$(TEST_WORKERS)'))))")
BACKENDS ?= auto torch
# The slowest tests (and notebooks) of each run, listed at its end: where CI's time goes.
DURATIONS ?= --durations=8
# Both papers' trainers have a compiled CPU engine (paper 1: softmax_icl.kernels; paper 2: classification/engine.c),
# so the PyTorch pass re-executes every notebook. The notebooks are listed longest first (fresh-clone CI at 1c010e0,
# PyTorch pass, seconds of their slowest cells: generalization 366 + 43, classification 383, norm_scaling 307 + 22 +
# 17, low_rank 109, window_adaptation 102) and handed out in this order (NB_SCHEDULE): each process that runs out of
# work takes the next one, so the longest start first and the processes finish close together. (pytest-xdist's
# default orders them by their number of cells, which left one process with classification alone and the other with
# the other four, about 940 s of cells in a 985 s pass.) A notebook runs on one process, so the pass takes at least
# the larger half of the best split of the five (about 750 s at 1c010e0, whose pass took 786 s).
NOTEBOOKS ?= notebooks/generalization.ipynb notebooks/classification_kernel_gd.ipynb notebooks/norm_scaling.ipynb \
  notebooks/low_rank.ipynb notebooks/window_adaptation.ipynb
NOTEBOOKS_auto ?= $(NOTEBOOKS)
NOTEBOOKS_torch ?= $(NOTEBOOKS)
NB_SCHEDULE := $(if $(filter 1,$(TEST_WORKERS)),,--no-loadscope-reorder)
SKIP_torch ?=
# `make audit`: fresh seed sets per figure (see `softmax-icl audit --help`); EXECUTOR: serial | local | slurm | gpus
AUDIT_SETS ?= 5
EXECUTOR ?= serial

.PHONY: setup book test audit figures pages bench clean

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

## Unit tests, then nbval + the regression test under each backend (fresh cache, records outside the repo).
test: setup
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; status=0; \
	export OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$(WORKER_THREADS)}; \
	echo "== the C engines: compiled once here, side by side, then put in every pass's fresh result cache"; \
	SOFTMAX_ICL_CACHE_DIR=$$tmp/engines $(BIN)/python -c "from softmax_icl import kernels; \
	  print(' paper 1:', kernels.backend())" & engine=$$!; \
	SOFTMAX_ICL_CACHE_DIR=$$tmp/engines $(BIN)/python -c "from softmax_icl.classification import native; \
	  print(' paper 2:', native.backend())" || status=1; \
	wait $$engine || status=1; \
	for p in unit $(BACKENDS); do mkdir -p $$tmp/$$p/cache; \
	  if [ -d $$tmp/engines/kernels ]; then cp -r $$tmp/engines/kernels $$tmp/$$p/cache/; fi; done; \
	echo "== unit tests ($(TEST_WORKERS) processes, $$OMP_NUM_THREADS threads each)"; \
	SOFTMAX_ICL_CACHE_DIR=$$tmp/unit/cache SOFTMAX_ICL_OUTPUT_DIR=$$tmp/unit/output SOFTMAX_ICL_PROGRESS=0 \
	  $(BIN)/python -m pytest $(XDIST) $(DURATIONS) $(UNIT_ARGS) || status=1; \
	for k in $(BACKENDS); do \
	  echo "== notebooks (nbval) and regression against book/results, SOFTMAX_ICL_KERNEL=$$k"; \
	  export SOFTMAX_ICL_KERNEL=$$k SOFTMAX_ICL_CACHE_DIR=$$tmp/$$k/cache SOFTMAX_ICL_OUTPUT_DIR=$$tmp/$$k/output \
	    SOFTMAX_ICL_PROGRESS=0; \
	  if [ $$k = torch ]; then nbs="$(NOTEBOOKS_torch)"; skip="$(SKIP_torch)"; else nbs="$(NOTEBOOKS_auto)"; skip=""; fi; \
	  $(BIN)/python -m pytest $(XDIST) $(NB_SCHEDULE) $(DURATIONS) $$nbs $(NB_ARGS) || status=1; \
	  SOFTMAX_ICL_REQUIRE_FRESH=1 $(BIN)/python -m pytest tests/test_regression.py::test_fresh_record_matches_the_book \
	    $${skip:+-k "not $$skip"} || status=1; \
	done; exit $$status

## Rerun every figure with fresh seed sets and write the audit records (book/results/audit/), then the pages.
audit: setup
	$(BIN)/softmax-icl audit --sets $(AUDIT_SETS) --executor $(EXECUTOR)

## Notebooks only (no HTML).
figures: setup
	$(BIN)/softmax-icl build --skip-html

pages: setup
	$(BIN)/softmax-icl pages

## Roofline: each heavy paper-profile stage's step against this machine's floor (C engine and PyTorch), ~10 min.
bench: setup
	$(BIN)/python benchmarks/roofline.py $(BENCH_ARGS)

clean:
	rm -rf _build runs
