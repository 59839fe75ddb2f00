#!/usr/bin/env bash
# Checks and runs on a lent CUDA machine (issues 13 and 26), in one or more calls of at most ~10 minutes each.
#
# The machine has no registry: the Python packages its image lacks travel as cp312 wheels in .whl/ (papermill,
# ipykernel, submitit and their dependencies the image lacks; myst-nb and docutils, which the notebooks import to glue
# their figures), made here with
#   pip download --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl papermill nbformat ipykernel submitit
#   pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl myst-nb==1.4.0 docutils==0.21.2
# then deleting the wheels of packages the image has (numpy, pyyaml, requests, tqdm, ...: two versions of one package
# stop the install). The result cache travels in .devcache/ (both folders git-ignored, carried by the device tool),
# and every call resumes where the last stopped: each finished stage of a notebook is read back from the cache.
#
#   bash tools/gpu_session.sh REVISION PHASES BUDGET_S [FIGURES...]
#     REVISION   the committed revision of this tree (recorded as "<rev> (stated)": the copy has no .git)
#     PHASES     comma-separated, run in this order: env, tests, bench, roofline, default, smoke, paper
#                (tests: every CUDA test; bench: benchmarks/step_time.py; roofline: benchmarks/roofline.py --device
#                cuda; default: the five notebooks at the default profile on the GPU, then their records held against
#                the book's CPU records by tests/test_regression.py). TESTS_K narrows the tests (pytest -k).
#     BUDGET_S   seconds from the start after which default and paper runs are stopped (their finished stages
#                stay in the cache)
#     FIGURES    the paper runs to (re)start (default: all five)
#
# What comes back in $OUT: log.txt (the summary), logs.tgz (every command's output, nvidia-smi every 5 s, the
# benchmark), 0records.tgz (the runs' records and notebooks, not their figure files) and cache.tgz.NN (15 MiB parts,
# only for figures whose paper run did not finish).
#
# Learned on an H100 (2026-11-25, benchmarks/gpu_h100.md): the paper stages with long contexts keep the GPU busy
# (utilisation 100 %), so notebooks run at once share it rather than overlap; a stage is cached only when it
# finishes, so give a call at least the length of its longest stage. On an H200 (2026-11-27, benchmarks/gpu_h200.md)
# `env,tests,default` took about 4 minutes of device time: the CUDA tests 50 s, the five default notebooks at once
# 130 s. With the graphed step (fourth session of 2026-11-27): tests 64 s, roofline (both variants) 146 s; the five
# paper notebooks at once finished low_rank, generalization and window_adaptation in 184-266 s and classification in
# 329 + 245 s (two calls), while norm_scaling needed more than 590 s. With the Triton words (fifth session):
# `env,tests,paper 545` ran the 18 CUDA tests in 79 s and the five paper notebooks at once in 451 s (norm_scaling last,
# just inside the budget: give `paper` at least 470 s), `roofline` (Triton and PyTorch words) 145 s. On an H100 (sixth
# session): `env,paper 585` finished all five in 488 s (norm_scaling last), `tests,roofline` took 225 s.
set -uo pipefail
REV=${1:?revision}; PHASES=${2:-env,tests,default}; BUDGET=${3:-520}; shift 3 || true
T0=$(date +%s)
OUT=${OUT:-$PWD/.devout}; mkdir -p "$OUT"
LOG=$OUT/log.txt; LOGS=/tmp/devlogs; mkdir -p $LOGS
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }
has() { [[ ",$PHASES," == *",$1,"* ]]; }

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  >>"$LOG" 2>&1 || { say "wheel install failed"; exit 3; }
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
export SOFTMAX_ICL_CACHE_DIR=$PWD/.devcache SOFTMAX_ICL_PROGRESS=0 SOFTMAX_ICL_REVISION=$REV
# The device's copy may hold a .git of another revision (on 2026-11-27 its HEAD was 12836a4 while the tree was
# f393730, and the records said "12836a4-dirty"): hide it, so every record names the stated revision.
export GIT_DIR=$PWD/.no-such-git-dir
mkdir -p "$SOFTMAX_ICL_CACHE_DIR"
CLI="python3 -m softmax_icl.cli"
ALL="window_adaptation norm_scaling generalization low_rank classification_kernel_gd"
FIGS=${*:-$ALL}

# at_once PROFILE SECONDS OUTPUT FIGURES...: the notebooks at PROFILE on the GPU, all at once (3 CPU threads each),
# each stopped after SECONDS (SIGINT: its finished stages stay in the cache); OUTPUT is the --output folder ("" for
# the CLI's own runs/<figure>-<profile>). Each one's log is $LOGS/<profile>-<figure>.log, its exit status goes to $LOG.
at_once() {
  local profile=$1 left=$2 output=$3 pids=() f
  shift 3
  for f in "$@"; do
    ( s=$(date +%s); OMP_NUM_THREADS=3 timeout -s INT -k 20 "$left" $CLI run "$f" --profile "$profile" --device cuda \
        ${output:+--output "$output"} >"$LOGS/$profile-$f.log" 2>&1; rc=$?
      echo "[$(( $(date +%s) - T0 ))s] $f $profile rc=$rc after $(( $(date +%s) - s ))s" >>"$LOG" ) &
    pids+=($!)
  done
  wait "${pids[@]}"   # not a bare wait: nvidia-smi runs in the background
}

nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,clocks.sm --format=csv -l 5 >"$LOGS/gpu.csv" 2>/dev/null &
SMI=$!

if has env; then
  say "env"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$LOG"
  python3 -c "import sys, torch, numpy, matplotlib, papermill; print(sys.version.split()[0], 'torch', torch.__version__,
  'cuda', torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0), 'numpy', numpy.__version__,
  'mpl', matplotlib.__version__, 'papermill', papermill.__version__, 'cpus', __import__('os').cpu_count())" 2>&1 | tee -a "$LOG"
  python3 -c "import triton; print('triton', triton.__version__)" 2>&1 | tail -1 | tee -a "$LOG"
  ls -a | tr '\n' ' ' | tee -a "$LOG"; echo | tee -a "$LOG"
fi

if has tests; then
  say "tests: every CUDA test (draws, training and a smoke notebook, CPU against GPU)"
  timeout 180 python3 -m pytest -q -p no:cacheprovider tests/test_streams.py tests/test_device.py \
    tests/test_classification.py -k "${TESTS_K:-cuda or smoke or another_device or triton}" -rA 2>&1 | tee "$LOGS/tests.txt" | tail -40 \
    | tee -a "$LOG"
  say "tests done"
fi

if has bench; then
  say "bench: PyTorch step time against batch size (eager / torch.compile / CUDA graph)"
  timeout 150 python3 benchmarks/step_time.py --no-cpu --batches 64 256 1024 4096 --rounds 5 2>&1 \
    | tee "$LOGS/bench.txt" | tail -30 >>"$LOG"
  say "bench done"
fi

if has roofline; then
  say "roofline: the heavy paper stages' steps on the GPU against its floor (graphed, with and without Triton)"
  timeout 200 python3 benchmarks/roofline.py --device cuda --rounds 1 --budget 1.5 --json "$OUT/roofline_cuda.json" \
    --backends ${ROOFLINE_BACKENDS:-torch torch-no-triton} \
    2>&1 | tee "$LOGS/roofline.txt" | tail -20 >>"$LOG"
  say "roofline done"
fi

if has default; then
  left=$(( BUDGET - ($(date +%s) - T0) ))
  say "default: five notebooks at once on cuda, stopped after ${left}s"
  at_once default "$left" runs/default-cuda $ALL
  say "default done: the GPU records against the book's (CPU) records"
  SOFTMAX_ICL_OUTPUT_DIR=runs/default-cuda timeout 60 python3 -m pytest -q -p no:cacheprovider \
    tests/test_regression.py::test_fresh_record_matches_the_book -rA 2>&1 | tail -30 | tee -a "$LOG"
fi

if has smoke; then
  say "smoke: five notebooks at once on cuda"
  at_once smoke 240 "" $ALL
  say "smoke done"
  for f in $ALL; do tail -3 "$LOGS/smoke-$f.log" | sed "s/^/  $f: /" >>"$LOG"; done
fi

if has paper; then
  left=$(( BUDGET - ($(date +%s) - T0) ))
  say "paper: the notebooks at once on cuda, stopped after ${left}s"
  at_once paper "$left" "" $FIGS
  say "paper done"
fi

kill $SMI 2>/dev/null
pkill -f ipykernel_launcher 2>/dev/null   # a kernel papermill started runs in its own session: stop it
# What comes back (the tool returns at most 8 files and 64 MiB in all): first the records and notebooks of the paper
# runs, then the cache of the figures whose paper run did not finish (a stage is cached only when it completes: a
# stage cut off by the budget is retrained from its start by the next call).
# the tool fills its 64 MiB in the order of the names: "0records" comes first, the cache parts after it
tar czf "$OUT/0records.tgz" runs/*/results runs/*/*.ipynb 2>/dev/null
unfinished=()
if has paper; then
  for f in $FIGS; do [ -f "runs/$f-paper/results/$f.json" ] || unfinished+=(".devcache/$f-*"); done
fi
if [ ${#unfinished[@]} -gt 0 ]; then
  tar czf - ${unfinished[@]} .devcache/kernels 2>/dev/null | split -b 15M -d - "$OUT/cache.tgz."
fi
tar czf "$OUT/logs.tgz" -C $LOGS . 2>/dev/null
for f in $ALL; do
  for r in "runs/$f-smoke/results/$f.json" "runs/$f-paper/results/$f.json" "runs/default-cuda/results/$f.json"; do
    [ -f "$r" ] && python3 - "$r" <<'EOF' | tee -a "$LOG"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["claims"]; p = r["provenance"]
print(f"{r['notebook']:<26} {r['profile']:<6} {p['device']:<7} total {r['timings'].get('total')} s, "
      f"peak {p.get('peak_memory_mb')}, {sum(x['passed'] for x in c)}/{len(c)} pass")
EOF
  done
done
ls -la "$OUT" | tee -a "$LOG"
say "end"
