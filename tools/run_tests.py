"""`make test`'s runner: every test job of the unit pass and of each backend's notebook pass, on a fixed number of
processes at once, the longest first.

Every piece is one job (a compilation, a group of unit-test files, one notebook under one backend, a backend's
regression test), and ``--workers`` jobs run at once: a free process takes the ready job expected to take longest
(the compilations first: the unit tests and the compiled-engine notebooks wait for them; the PyTorch pass needs no
engine). The expected times (:data:`EXPECTED`) are seconds measured on the book's 2-core machine; they only order the
jobs.

* The compiled-engine pass (``auto``, the CPU product) re-executes every notebook at the book's default profile under
  nbval, which compares each notebook's verdict lines, and after its last notebook ``tests/test_regression.py``
  holds its fresh records against ``book/results`` (verdicts exactly, numbers within the declared tolerances).
* The PyTorch pass (``torch``, ``SOFTMAX_ICL_KERNEL=torch``: the GPU product and the reference the engines are
  tested against) executes every notebook once at the ``smoke`` profile (``softmax-icl run FIGURE --profile
  smoke``), which must complete without error; its verdicts are the smoke profile's, not the book's, so nothing
  compares them with the committed outputs. The PyTorch path's numbers are held by the unit tests instead, which
  hold every engine against it.

A job's output is printed in one block when it ends (never interleaved with another's), after a line with its
name, status and time; every job runs even when one fails, and the exit status is 1 when any failed. Ctrl-C (or a
SIGTERM) stops every running job and removes the temporary folders.

    python tools/run_tests.py [--workers N] [--backends auto torch] [--notebooks NB ...] [--unit=ARGS] ...

(an option's value that starts with ``--``, such as ``--nb-args=--nbval-lax``, is given after ``=``)
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("auto", "torch")
# The unit-test files that run as a job of their own (the rest of the unit tests is one job): the browser test
# builds the book strictly and opens every page twice.
ALONE = ("tests/test_book_browser.py",)
# Seconds, measured (`make test` with the jobs' bytecode cache, each job beside one other; the engines'
# compilation when not cached; benchmarks/RESULTS.md has the latest table): they only order the jobs.
EXPECTED = {
    "engine paper 1": 57, "engine paper 2": 12,
    "unit tests/test_book_browser.py": 118, "unit tests": 125,
    "torch classification_kernel_gd": 112, "torch norm_scaling": 86, "torch generalization": 80,
    "torch low_rank": 72, "torch window_adaptation": 58,
    "auto norm_scaling": 49, "auto classification_kernel_gd": 46, "auto generalization": 37,
    "auto low_rank": 22, "auto window_adaptation": 17, "auto tutorial": 20,
}
#: The profile of the PyTorch pass's notebook runs.
TORCH_PROFILE = "smoke"


@dataclass
class Job:
    name: str
    commands: list[list[str]]                  # run one after the other; the job fails if any fails (none: the
    #                                            job is ``then``, run in this process)
    env: dict = field(default_factory=dict)     # over the runner's environment; a value None removes the variable
    after: tuple = ()                          # names of the jobs that must have ended first
    expected: float = 60.0
    then: object = None                        # called (no arguments) once the job has ended well
    status: str = "waiting"
    order: int = 0                             # when it started (1, 2, ...)
    seconds: float = 0.0


def _pytest(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]


def softmax_icl_command() -> str:
    """The package's command line (``softmax-icl``), beside this Python's executable where it is installed there."""
    here = Path(sys.executable).with_name("softmax-icl")
    return str(here) if here.exists() else (shutil.which("softmax-icl") or "softmax-icl")


def plan(tmp: Path, backends, notebooks: dict, unit_args: list[str], nb_args: list[str], durations: list[str],
         threads: int) -> list[Job]:
    """The jobs of `make test` (see the module's docstring), with their environments and order constraints
    (``backends`` among :data:`BACKENDS`, as :func:`main` checks)."""
    common = {"OMP_NUM_THREADS": str(threads), "SOFTMAX_ICL_PROGRESS": "0"}
    # Bytecode: where Python may not keep it (PYTHONDONTWRITEBYTECODE, as on the book's machine), every process
    # compiles the modules it imports (torch, matplotlib, Sphinx, the package) from source when it starts: 4.6-5.2 s
    # of a notebook's imports instead of 2.0-2.2 s. The jobs then keep theirs in the run's temporary folder (nothing
    # is written into the tree or the virtual environment; None removes a variable). Elsewhere Python's own
    # __pycache__ folders (or the user's PYTHONPYCACHEPREFIX) serve, and are left alone.
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        common.update(PYTHONPYCACHEPREFIX=str(tmp / "pycache"), PYTHONDONTWRITEBYTECODE=None)
    engines = {"SOFTMAX_ICL_CACHE_DIR": str(tmp / "engines")}
    passes = ["unit", *backends]

    def share_engines():   # a build product keyed by its sources, compiler, flags and CPU, not a result
        src = tmp / "engines" / "kernels"
        for p in passes:
            (tmp / p / "cache").mkdir(parents=True, exist_ok=True)
            if src.is_dir() and not (tmp / p / "cache" / "kernels").exists():
                shutil.copytree(src, tmp / p / "cache" / "kernels")

    jobs = [
        *(Job(name, [[sys.executable, "-m", "softmax_icl.engine.build", name]], {**common, **engines})
          for name in ("engine paper 1", "engine paper 2")),
        Job("engines shared", [], after=("engine paper 1", "engine paper 2"), then=share_engines, expected=0),
    ]
    built = ("engines shared",)
    unit_env = {**common, "SOFTMAX_ICL_CACHE_DIR": str(tmp / "unit" / "cache"),
                "SOFTMAX_ICL_OUTPUT_DIR": str(tmp / "unit" / "output")}
    if unit_args == ["tests"]:
        alone = [a for a in ALONE if (ROOT / a).is_file()]
        for a in alone:
            jobs.append(Job(f"unit {a}", [_pytest(*durations, a)], unit_env, after=built))
        jobs.append(Job("unit tests", [_pytest(*durations, "tests", *[f"--ignore={a}" for a in alone])], unit_env,
                        after=built))
    elif unit_args:
        jobs.append(Job("unit " + " ".join(unit_args), [_pytest(*durations, *unit_args)], unit_env, after=built))
    for k in backends:
        env = {**common, "SOFTMAX_ICL_KERNEL": k, "SOFTMAX_ICL_CACHE_DIR": str(tmp / k / "cache"),
               "SOFTMAX_ICL_OUTPUT_DIR": str(tmp / k / "output")}
        if k == "torch":
            # one run of each notebook at the smoke profile, which must complete; no engine, so it starts at once
            for nb in notebooks[k]:
                fig = Path(nb).stem
                jobs.append(Job(f"torch {fig}", [[softmax_icl_command(), "run", fig, "--profile", TORCH_PROFILE,
                                                  "--output", str(tmp / k / "output" / fig)]], env))
            continue
        names = []
        for nb in notebooks[k]:
            name = f"{k} {Path(nb).stem}"
            names.append(name)
            jobs.append(Job(name, [_pytest(*durations, nb, *nb_args)], env, after=built))
        jobs.append(Job(f"{k} regression", [_pytest("tests/test_regression.py::test_fresh_record_matches_the_book")],
                        {**env, "SOFTMAX_ICL_REQUIRE_FRESH": "1"}, after=tuple(names), expected=3))
    for j in jobs:
        j.expected = EXPECTED.get(j.name, j.expected)
    return jobs


def seed_engines(dest: Path, source: Path | None = None) -> list[str]:
    """Copy the compiled engines already in the user's engine cache (``$SOFTMAX_ICL_CACHE_DIR/kernels``, default
    ``~/.cache/softmax_icl/kernels``: ``make setup`` builds them there while pip installs) into ``dest/kernels``, the
    engine jobs' fresh cache; returns the names copied. A library is named by a hash of its sources, compiler, flags
    and CPU, so an engine job uses a copy only where it is the build it would make (else it compiles), as the passes
    share the libraries the engine jobs build: a build product, not a result."""
    if source is None:
        source = Path(os.environ.get("SOFTMAX_ICL_CACHE_DIR") or Path.home() / ".cache" / "softmax_icl") / "kernels"
    if not source.is_dir():
        return []
    libs = sorted(p for p in source.glob("*.so") if not p.name.startswith("."))
    (dest / "kernels").mkdir(parents=True, exist_ok=True)
    for p in libs:
        shutil.copy2(p, dest / "kernels" / p.name)
    return [p.name for p in libs]


def _ready(jobs: list[Job]) -> list[Job]:
    """Waiting jobs whose predecessors have ended, the compilations first, then the longest expected first."""
    ended = {j.name for j in jobs if j.status in ("passed", "failed")}
    ready = [j for j in jobs if j.status == "waiting" and all(a in ended for a in j.after)]
    return sorted(ready, key=lambda j: (not j.name.startswith("engine"), -j.expected))


def run(jobs: list[Job], workers: int, log_dir: Path, out=None) -> int:
    """Run ``jobs`` on ``workers`` processes at once; 0 when every job passed, else 1."""
    out = out or sys.stdout
    names = [j.name for j in jobs]
    unknown = {a for j in jobs for a in j.after} - set(names)
    if unknown or len(set(names)) != len(names):
        raise ValueError(f"bad job graph: unknown predecessors {sorted(unknown)} or repeated names")
    t0 = time.monotonic()
    running: dict[str, tuple] = {}

    def stamp() -> str:
        return f"[{time.monotonic() - t0:6.0f} s]"

    started = 0

    def start(job: Job):
        nonlocal started
        started += 1
        job.order = started
        if not job.commands:
            job.then()
            job.status = "passed"
            return
        log = open(log_dir / f"{started:02d}-{job.name.replace('/', '_').replace(' ', '_')}.log", "w+")
        job.status, job.seconds = "running", time.monotonic()
        cmds = " && ".join(shlex.join(c) for c in job.commands)
        env = {k: v for k, v in {**os.environ, **job.env}.items() if v is not None}     # None: not set
        proc = subprocess.Popen(["bash", "-c", cmds], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        running[job.name] = (job, proc, log)
        print(f"{stamp()} start {job.name}", file=out, flush=True)

    def stop(signum, frame):       # a SIGTERM (a CI timeout, kill) stops the jobs too, as Ctrl-C does
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        while True:
            while len(running) < workers and (ready := _ready(jobs)):
                start(ready[0])            # (a job without commands ends as it starts)
            if not running:
                break
            time.sleep(0.2)
            for name, (job, proc, log) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[name]
                job.seconds = time.monotonic() - job.seconds
                job.status = "passed" if proc.returncode == 0 else "failed"
                if job.status == "passed" and job.then is not None:
                    job.then()
                log.seek(0)
                print(f"{stamp()} == {job.name}: {job.status} in {job.seconds:.0f} s"
                      + ("" if job.status == "passed" else f" (exit status {proc.returncode})"), file=out)
                print(log.read().rstrip(), file=out, flush=True)
                log.close()
            if any(j.status == "waiting" for j in jobs) and not running and not _ready(jobs):
                raise RuntimeError("no job can start")  # unreachable with a checked graph; never spin silently
    except BaseException:
        for job, proc, log in running.values():
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            proc.wait()
            log.close()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    failed = [j.name for j in jobs if j.status != "passed"]
    width = max(len(n) for n in names)
    print(f"\n{stamp()} jobs, in the order they started:", file=out)
    for j in sorted(jobs, key=lambda j: j.order or len(jobs) + 1):
        print(f"  {j.name:<{width}}  {j.status:<7} {j.seconds:6.0f} s", file=out)
    print("all jobs passed" if not failed else f"FAILED: {', '.join(failed)}", file=out, flush=True)
    return 1 if failed else 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="jobs at once (default: the cores)")
    ap.add_argument("--threads", type=int, default=0,
                    help="OMP_NUM_THREADS of each job (default: $OMP_NUM_THREADS, else cores // workers)")
    ap.add_argument("--backends", nargs="*", default=list(BACKENDS), help=f"among {BACKENDS}")
    ap.add_argument("--notebooks", nargs="*", default=None, help="every backend's notebooks (default: all)")
    ap.add_argument("--notebooks-auto", nargs="*", default=None,
                    help="the compiled-engine pass's notebooks (nbval at the default profile, then the regression)")
    ap.add_argument("--notebooks-torch", nargs="*", default=None,
                    help=f"the PyTorch pass's notebooks (each run once at the {TORCH_PROFILE!r} profile)")
    ap.add_argument("--unit", default="tests", help="the unit tests' pytest arguments ('' for none)")
    ap.add_argument("--nb-args", default="--nbval-lax --nbval-sanitize-with notebooks/nbval_sanitize.cfg")
    ap.add_argument("--durations", default="--durations=8", help="pytest's --durations for every job")
    ap.add_argument("--times-json", metavar="PATH", help="also write the job table and the machine to PATH (JSON; "
                    "benchmarks/results/ci_times.json is what benchmarks/results_page.py reads)")
    return ap


def write_times(path: str, jobs: list, workers: int, threads: int, wall: float) -> None:
    """The job table ``run`` prints, as JSON, with the machine and the wall time from the first start to the end."""
    import json
    import platform
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), None) if Path("/proc/cpuinfo").is_file() else None
    table = [{"name": j.name, "status": j.status, "seconds": round(j.seconds, 1)}
             for j in sorted(jobs, key=lambda j: j.order or len(jobs) + 1)]
    Path(path).write_text(json.dumps({"cpu": cpu or platform.processor() or platform.machine(), "cores": os.cpu_count(),
                                      "workers": workers, "threads": threads, "wall_seconds": round(wall, 1),
                                      "jobs": table}, indent=1) + "\n")


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.workers < 1:
        ap.error(f"--workers must be at least 1, not {args.workers}")
    if set(args.backends) - set(BACKENDS):
        ap.error(f"--backends: {sorted(set(args.backends) - set(BACKENDS))} not among {BACKENDS}")
    every = args.notebooks if args.notebooks is not None else sorted(str(p.relative_to(ROOT))
                                                                       for p in (ROOT / "notebooks").glob("*.ipynb"))
    notebooks = {"auto": args.notebooks_auto if args.notebooks_auto is not None else every,
                 "torch": args.notebooks_torch if args.notebooks_torch is not None else every}
    missing = [nb for k in args.backends for nb in notebooks.get(k, []) if not (ROOT / nb).is_file()]
    if missing:
        ap.error(f"no such notebook(s): {missing}")
    threads = args.threads or int(os.environ.get("OMP_NUM_THREADS") or 0) or max(1, (os.cpu_count() or 1)
                                                                                 // args.workers)
    with tempfile.TemporaryDirectory(prefix="softmax-icl-test-") as tmp:
        tmp = Path(tmp)
        (tmp / "logs").mkdir()
        jobs = plan(tmp, args.backends, notebooks, shlex.split(args.unit), shlex.split(args.nb_args),
                    shlex.split(args.durations), threads)
        seeded = seed_engines(tmp / "engines")
        print(f"== {len(jobs)} jobs on {args.workers} processes at once, {threads} thread(s) each"
              + (f"; engines already built in the user's cache: {', '.join(seeded)}" if seeded else ""), flush=True)
        try:
            start = time.monotonic()
            status = run(jobs, args.workers, tmp / "logs")
            if args.times_json:
                write_times(args.times_json, jobs, args.workers, threads, time.monotonic() - start)
            return status
        except KeyboardInterrupt:
            print("\ninterrupted: every running job was stopped", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())
