"""Notebook runs at once on one CPU: every job taking every core, against each taking an even share of them.

``softmax-icl build --executor local`` (and ``--executor gpus``) starts its jobs at once on one machine. Left alone,
each job's PyTorch (and the fused kernel, which follows ``torch.get_num_threads()``) starts one thread per core, so
J jobs put J x cores threads on the cores; threads that wait for one another at every parallel region then wait for
threads of other processes too. :func:`softmax_icl.book.dispatch.thread_share` gives each job ``cores // J`` threads
instead. This script measures what that changes, as ratios in one run (no absolute targets).

Each job is a separate process that builds the same sweep, takes one warm-up step, waits until every job of its
scenario is ready, then trains ``--steps`` steps and reports their time; a scenario's time is its slowest job's
(start-up, imports and warm-up are not timed). Scenarios, each with
the same work per job:

* ``alone``: one job with every core (the serial executor's job);
* ``every core``: J = cores jobs at once, each with every core as its thread count (the local executor before);
* ``shared``: J = cores jobs at once, each with :func:`~softmax_icl.book.dispatch.thread_share`'s threads (the local
  executor now: ``cores // J``).

Printed: each scenario's throughput (jobs x steps per second) relative to ``alone``, and ``shared`` over ``every
core``; medians over ``--rounds`` rounds (scenarios interleaved in every round, so drift on a shared machine hits
them alike) with the interquartile range. Workloads: ``regression`` (a 32-configuration sweep of the regression
units, d = 5: sampling in PyTorch, loss in the fused kernel where it compiles) and ``classification`` (the
classification chapter's main setting at the default profile: PyTorch throughout).

Usage:  python benchmarks/thread_share.py [--workload regression classification] [--steps 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from softmax_icl.book.dispatch import THREAD_ENV, thread_share, usable_cores


def worker(workload: str, steps: int) -> None:
    """One job: build the sweep, one warm-up step, then ``steps`` timed steps; prints the seconds as JSON."""
    import dataclasses

    import torch

    if workload == "regression":
        from softmax_icl.training import Sweep, train_sweep

        def run(k: int) -> None:
            sw = Sweep(model="softmax", classes=("relu", "cosine"), L=(0.3, 1.0, 3.0, 10.0), sigma=(0.1, 0.5),
                       n=(100,), seeds=2, d=5, steps=k, batch_size=512, log_every=k)
            train_sweep(sw, device="cpu")
    else:
        from softmax_icl.classification.models import train_cls_sweep
        from softmax_icl.figures.classification_kernel_gd import sweeps as S
        from softmax_icl.figures import FIGURES

        main = S.sweeps(FIGURES.resolve("classification_kernel_gd", "default"))["main"]

        def run(k: int) -> None:
            train_cls_sweep(dataclasses.replace(main, steps=k, log_every=k), "cpu")

    run(1)
    print("ready", flush=True)
    sys.stdin.readline()                             # the go: every job of the scenario starts together
    t = time.perf_counter()
    run(steps)
    print(json.dumps({"seconds": time.perf_counter() - t, "threads": torch.get_num_threads()}))


def scenario(workload: str, jobs: int, threads: int, steps: int) -> float:
    """Time of the slowest of ``jobs`` worker processes, each with ``threads`` threads, started together."""
    env = {**os.environ, **{k: str(threads) for k in THREAD_ENV}}
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", workload, "--steps", str(steps)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for _ in range(jobs)]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"a {workload} job with {threads} thread(s) failed before its timed steps")
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    seconds = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"a {workload} job with {threads} thread(s) failed (exit {p.returncode})")
        res = json.loads(out.strip().splitlines()[-1])
        if res["threads"] != threads:
            raise RuntimeError("a job did not take the thread count it was given")
        seconds.append(res["seconds"])
    return max(seconds)


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", nargs="+", default=["regression", "classification"],
                    choices=["regression", "classification"])
    ap.add_argument("--steps", type=int, default=30, help="timed training steps per job")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (every scenario once per round)")
    ap.add_argument("--worker", choices=["regression", "classification"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.steps)
        return
    if any(os.environ.get(k) for k in THREAD_ENV):
        sys.exit(f"unset {' and '.join(THREAD_ENV)}: this script sets the thread counts itself")
    cores = usable_cores()
    if cores < 2:
        sys.exit("one core: there is nothing to share")
    J = cores
    print(f"{cores} cores; {J} jobs at once; {args.steps} steps per job; {args.rounds} rounds")
    for workload in args.workload:
        shared = int(thread_share(J, cores)["OMP_NUM_THREADS"])           # what the local executor gives each job
        plans = {"alone": (1, cores), "every core": (J, cores), "shared": (J, shared)}
        rates: dict[str, list[float]] = {k: [] for k in plans}
        for r in range(args.rounds):
            names = list(plans)[r % len(plans):] + list(plans)[:r % len(plans)]
            for name in names:
                jobs, threads = plans[name]
                rates[name].append(jobs * args.steps / scenario(workload, jobs, threads, args.steps))
        print(f"\n{workload}:")
        for name, (jobs, threads) in plans.items():
            rel = [x / a for x, a in zip(rates[name], rates["alone"])]
            lo, med, hi = quartiles(rel)
            print(f"  {name:<11} {jobs} job(s) x {threads} thread(s): throughput {statistics.median(rates[name]):7.2f} "
                  f"steps/s = {med:.2f} x alone (IQR {lo:.2f}-{hi:.2f})")
        lo, med, hi = quartiles([s / e for s, e in zip(rates["shared"], rates["every core"])])
        print(f"  shared / every core: {med:.2f} (IQR {lo:.2f}-{hi:.2f})")


if __name__ == "__main__":
    main()
