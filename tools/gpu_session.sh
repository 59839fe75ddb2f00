#!/usr/bin/env bash
# Checks and runs on a lent CUDA machine, in one or more calls of at most ~10 minutes each.
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
# Sizing a call: the paper stages with long contexts keep the GPU busy, so notebooks run at once share it rather than
# overlap, and a stage is cached only when it finishes, so give a call at least the length of its longest stage. The
# whole paper profile, five notebooks at once, ends with norm_scaling, the longest (its time per GPU is in
# benchmarks/RESULTS.md): give `paper` that and a margin; `env,tests,default` and `tests,roofline` each fit in a few
# minutes.
#
# Every process the script starts (nvidia-smi, the notebooks, the tests and benchmarks under `timeout`, which puts
# each in a process group of its own) carries GPU_RUN_TAG in its environment, and so does everything they start, the
# notebooks' kernels included (jupyter_client starts each with setsid, outside that group). At the end, and on
# an error or an interrupt, the script ends exactly those: the process groups it started, by their ids, then any
# process that still carries this run's tag, by its id.
set -uo pipefail
REV=${1:?revision}; PHASES=${2:-env,tests,default}; BUDGET=${3:-520}; shift 3 || true
T0=$(date +%s)
OUT=${OUT:-$PWD/.devout}; mkdir -p "$OUT"
LOG=$OUT/log.txt; LOGS=/tmp/devlogs; mkdir -p $LOGS
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }

# The processes this run starts: their ids in $STARTED (one a line), each tagged with GPU_RUN_TAG=$TAG (see the top).
TAG="$$.$T0.$RANDOM"; STARTED=$LOGS/started.$TAG; : >"$STARTED"
export GPU_RUN_TAG=$TAG
MYPGID=$(ps -o pgid= -p $$ | tr -d ' ')
started() { echo "$1" >>"$STARTED"; }
# logged FILE CMD...: CMD in the background, its output to FILE, waited for (so that an interrupt is handled at
# once, not when CMD ends); its exit status.
logged() { local file=$1; shift; "$@" >"$file" 2>&1 & started $!; wait $!; }
# tagged: the ids of the processes carrying this run's tag, outside the script's own process group (the script, its
# subshells and this scan are in that group and end with it).
tagged() {
  local env p pgid
  for env in /proc/[0-9]*/environ; do
    grep -qzx "GPU_RUN_TAG=$TAG" "$env" 2>/dev/null || continue
    p=${env#/proc/}; p=${p%/environ}
    pgid=$(ps -o pgid= -p "$p" 2>/dev/null | tr -d ' ')
    [ -n "$pgid" ] && [ "$pgid" != "$MYPGID" ] && echo "$p"
  done
}
# stop_started: TERM to the process groups this run started (by their leaders' ids; a leader that is not one gets it
# alone) and to every process still carrying the tag, KILL to any left after 10 s. Idempotent.
stop_started() {
  local p left round
  for p in $(cat "$STARTED" 2>/dev/null); do
    kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
  done
  for round in 1 2 3 4 5 6 7 8 9 10; do
    left=$(tagged)
    [ -z "$left" ] && return 0
    [ "$round" = 1 ] && kill -TERM $left 2>/dev/null
    sleep 1
  done
  left=$(tagged)
  [ -n "$left" ] && { say "still running after TERM, killed: $left"; kill -KILL $left 2>/dev/null; }
  return 0
}
trap 'stop_started' EXIT
trap 'say "interrupted: stopping the processes this run started"; exit 130' INT TERM
has() { [[ ",$PHASES," == *",$1,"* ]]; }

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  >>"$LOG" 2>&1 || { say "wheel install failed"; exit 3; }
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
export SOFTMAX_ICL_CACHE_DIR=$PWD/.devcache SOFTMAX_ICL_PROGRESS=0 SOFTMAX_ICL_REVISION=$REV
# The device's copy may hold a .git of another revision than the tree's (the records would name that one): hide it,
# so every record names the stated revision.
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
    ( s=$(date +%s)
      OMP_NUM_THREADS=3 timeout -s INT -k 20 "$left" $CLI run "$f" --profile "$profile" --device cuda \
        ${output:+--output "$output"} >"$LOGS/$profile-$f.log" 2>&1 &
      started $!; wait $!; rc=$?
      echo "[$(( $(date +%s) - T0 ))s] $f $profile rc=$rc after $(( $(date +%s) - s ))s" >>"$LOG" ) &
    pids+=($!)
  done
  wait "${pids[@]}"   # not a bare wait: nvidia-smi runs in the background
  # an interrupted notebook's kernel outlives papermill (its own process group): end this phase's kernels now
  stop_kernels
}
# stop_kernels: the kernels of the notebooks that have ended (tagged processes whose group leader is gone).
stop_kernels() {
  local p pgid
  for p in $(tagged); do
    pgid=$(ps -o pgid= -p "$p" 2>/dev/null | tr -d ' ')
    if [ -n "$pgid" ] && ! grep -qx "$pgid" "$STARTED"; then kill -TERM "$p" 2>/dev/null; fi
  done
  return 0
}

nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,clocks.sm --format=csv -l 5 >"$LOGS/gpu.csv" 2>/dev/null &
started $!

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
  logged "$LOGS/tests.txt" timeout 180 python3 -m pytest -q -p no:cacheprovider tests/test_streams.py \
    tests/test_device.py tests/test_classification.py -k "${TESTS_K:-cuda or smoke or another_device or triton}" -rA
  tail -40 "$LOGS/tests.txt" | tee -a "$LOG"
  say "tests done"
fi

if has bench; then
  say "bench: PyTorch step time against batch size (eager / torch.compile / CUDA graph)"
  logged "$LOGS/bench.txt" timeout 150 python3 benchmarks/step_time.py --no-cpu --batches 64 256 1024 4096 --rounds 5
  tail -30 "$LOGS/bench.txt" >>"$LOG"
  say "bench done"
fi

if has roofline; then
  say "roofline: the heavy paper stages' steps on the GPU against its floor (graphed, with and without Triton)"
  logged "$LOGS/roofline.txt" timeout 200 python3 benchmarks/roofline.py --device cuda --rounds 1 --budget 1.5 \
    --json "$OUT/roofline_cuda.json" --backends ${ROOFLINE_BACKENDS:-torch torch-no-triton}
  tail -20 "$LOGS/roofline.txt" >>"$LOG"
  say "roofline done"
fi

if has default; then
  left=$(( BUDGET - ($(date +%s) - T0) ))
  say "default: five notebooks at once on cuda, stopped after ${left}s"
  at_once default "$left" runs/default-cuda $ALL
  say "default done: the GPU records against the book's (CPU) records"
  SOFTMAX_ICL_OUTPUT_DIR=runs/default-cuda logged "$LOGS/regression.txt" timeout 60 python3 -m pytest -q \
    -p no:cacheprovider tests/test_regression.py::test_fresh_record_matches_the_book -rA
  tail -30 "$LOGS/regression.txt" | tee -a "$LOG"
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

stop_started   # nvidia-smi, and every process of the runs that is left (the kernels of stopped notebooks)
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
