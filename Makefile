# Thin wrappers. The two commands of the README:  `make book`  and  `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU build by default (on this project's machines pip finds a local CPU wheel of 2.13.0).
# For a GPU: make setup TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126"
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
# `make test` (tools/run_tests.py): the unit tests (UNIT_ARGS: they hold every compiled engine against the PyTorch
# code), the compiled-engine pass (nbval re-executing every notebook at the default profile, NB_ARGS: it compares the
# verdict lines only, with a fresh result cache and records written outside the repo, then tests/test_regression.py
# holding those fresh records against book/results within the declared tolerances, verdicts exactly), and the PyTorch
# pass (SOFTMAX_ICL_KERNEL=torch: every notebook executed once at the smoke profile, which must complete without
# error; its verdicts are the smoke profile's, not compared with the book's). Every piece is one job (each C engine's
# compilation, the browser test, the other unit tests, one notebook under one backend, the regression test) and
# TEST_WORKERS jobs run at once, the longest ready one first (the compilations before all: the unit tests and the
# compiled-engine notebooks wait for them, and get their libraries copied into their fresh caches, a build product
# keyed by its sources, compiler, flags and CPU, not a result; the PyTorch pass needs no engine and starts at once).
# As one queue the processes stay busy to the end, where passes run one after the other left cores idle while their
# longest file ran alone. CI's time, job by job: benchmarks/RESULTS.md (TEST_TIMES=PATH writes the job table as JSON).
UNIT_ARGS ?= tests
NB_ARGS ?= --nbval-lax --nbval-sanitize-with notebooks/nbval_sanitize.cfg
# Jobs at once; each gets an even share of the cores as its thread count (OMP_NUM_THREADS, unless you set it): no
# number depends on the thread count in the engines. TEST_WORKERS=1: one job at a time.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(os.cpu_count() or 1)")
WORKER_THREADS := $(shell $(PYTHON) -c "import os; print(max(1, (os.cpu_count() or 1) // max(1, int('$(TEST_WORKERS)'))))")
BACKENDS ?= auto torch
# The slowest tests (and notebook cells) of each job, listed at its end: where CI's time goes.
DURATIONS ?= --durations=8
# Both papers' trainers have a compiled CPU engine (softmax_icl.engine.regression, softmax_icl.engine.classification),
# so both passes execute every notebook.
NOTEBOOKS ?= notebooks/generalization.ipynb notebooks/classification_kernel_gd.ipynb notebooks/norm_scaling.ipynb \
  notebooks/low_rank.ipynb notebooks/window_adaptation.ipynb
# The tutorial (book/tutorial.ipynb, a class of one's own) runs under nbval in the compiled-engine pass; it is no
# figure, so the PyTorch pass (softmax-icl run FIGURE) has nothing to run of it (its own class trains in PyTorch).
NOTEBOOKS_auto ?= $(NOTEBOOKS) book/tutorial.ipynb
NOTEBOOKS_torch ?= $(NOTEBOOKS)
# `make audit`: seed sets per figure (the earlier pool and fresh ones) (see `softmax-icl audit --help`); EXECUTOR: auto | serial | cores | local |
# slurm | gpus
AUDIT_SETS ?= 5
EXECUTOR ?= auto

.PHONY: setup book test audit figures pages bench clean

setup: $(STAMP)

# --no-compile: Python compiles a module's bytecode when it is first imported; compiling every installed file up
# front (pip's default) took about half of the install's CPU time. Where Python may not keep it
# (PYTHONDONTWRITEBYTECODE), `make test`'s jobs keep theirs in their temporary folder.
# The compiled CPU engines (python -m softmax_icl.engine.build) are built while pip
# installs the book's and the tests' packages on the other core; they need only torch and numpy. Their libraries go to
# the engine cache, where the notebooks and `make test` look for them first; a build that fails is never an error
# (the same computation then runs in PyTorch).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet --no-compile "numpy>=1.24"
	PYTHONPATH=src $(BIN)/python -m softmax_icl.engine.build > $(VENV)/engines.log 2>&1 & engines=$$!; \
	  $(BIN)/python -m pip install --quiet --no-compile -e ".[book,test]"; status=$$?; \
	  wait $$engines; cat $(VENV)/engines.log; exit $$status
	$(BIN)/python -c "import torch, softmax_icl; print('installed softmax_icl', softmax_icl.__version__, 'with torch', torch.__version__)"
	touch $(STAMP)

## Execute every notebook at the default profile (papermill), regenerate the pages, render the HTML.
book: setup
	$(BIN)/softmax-icl build

## The unit tests, nbval + the regression test under the compiled engines, and a smoke run of every notebook under
## PyTorch (fresh caches, records outside the repo), as one queue of jobs (tools/run_tests.py).
test: setup
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$(WORKER_THREADS)} $(BIN)/python tools/run_tests.py --workers $(TEST_WORKERS) \
	  --backends $(BACKENDS) --notebooks-auto $(NOTEBOOKS_auto) --notebooks-torch $(NOTEBOOKS_torch) \
	  --unit="$(UNIT_ARGS)" --nb-args="$(NB_ARGS)" --durations="$(DURATIONS)" \
	  $(if $(TEST_TIMES),--times-json "$(TEST_TIMES)")

## Rerun every figure with other seed sets and write the audit records (book/results/audit/), then the pages.
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
