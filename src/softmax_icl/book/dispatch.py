"""Independent notebook runs (figures of a build, seed sets of an audit) sent to an existing executor.

Each run is a :class:`NotebookJob`: one notebook executed by :func:`softmax_icl.book.runner.execute_notebook` into its
own destination, with its own environment (where its record goes, the shared result cache). Nothing here schedules:

* ``serial``: one after another in this process (the terminal shows the progress bars);
* ``cores``: one notebook per CPU core at a time, each its own process with one thread, the longest expected first
  (a pool of :data:`usable_cores` workers; :func:`_core_pool`); the compiled CPU engines are built first, so the
  notebooks do not each compile them; a line per job as it starts and ends, and every minute what is running and how
  far its training has come;
* ``auto`` (the default of ``softmax-icl build`` and ``audit``): ``cores`` for CPU runs on a machine with two cores
  or more (except at the ``paper`` profile), else ``serial`` (:func:`auto_executor`);
* ``local``: ``submitit.LocalExecutor``, every job its own process on this machine, all at once;
* ``slurm``: ``submitit.AutoExecutor`` on a Slurm cluster (``--slurm-partition``, ``--slurm-gpus-per-node``,
  ``--slurm-time``); the result cache must be on a path every node sees (``SOFTMAX_ICL_CACHE_DIR``);
* ``gpus``: one notebook per local GPU at a time: a pool with one worker per device
  (:class:`concurrent.futures.ThreadPoolExecutor`), each job a subprocess that sees only its device
  (``CUDA_VISIBLE_DEVICES``).

A job that fails does not stop the others; :func:`run_jobs` returns every job's :class:`JobResult`.

Jobs that run at once on one machine (``local``, ``gpus``) share its CPU cores: each gets an even share as its
thread count (``OMP_NUM_THREADS``, which PyTorch and the fused kernel follow; :func:`thread_share`), unless the
environment already sets one. Left to itself every job would start one thread per core, and threads of several
processes that wait for one another at each parallel region are slowed far more than by their share of the cores
(benchmarks/cpu_paper.md).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

EXECUTORS = ("auto", "serial", "cores", "local", "slurm", "gpus")
#: Passed through to every job (the cache on a shared path; the numerical backend) when set here.
PASS_THROUGH_ENV = ("SOFTMAX_ICL_CACHE_DIR", "SOFTMAX_ICL_KERNEL")
#: The thread counts a job's numerical libraries read when they load (PyTorch's intra-op pool, the fused kernel).
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class NotebookJob:
    """Execute ``source`` with ``parameters`` into ``destination`` (cwd ``cwd``), with ``env`` set for the kernel."""

    label: str
    source: str
    destination: str
    parameters: dict
    cwd: str
    env: dict = field(default_factory=dict)


@dataclass(frozen=True)
class JobResult:
    label: str
    destination: str
    seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def job_env(extra: dict | None = None) -> dict:
    """The environment a job needs from this one (shared cache, backend), plus ``extra``."""
    env = {k: os.environ[k] for k in PASS_THROUGH_ENV if os.environ.get(k)}
    env.update(extra or {})
    return env


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                      # macOS, Windows
        return os.cpu_count() or 1


def thread_share(concurrent: int, cores: int | None = None) -> dict:
    """Environment giving each of ``concurrent`` jobs running at once an even share of the cores (at least one
    thread each); empty when this environment already names a thread count (the user's choice is passed on)."""
    if any(os.environ.get(k) for k in THREAD_ENV):
        return {}
    cores = usable_cores() if cores is None else cores
    share = max(1, cores // max(1, min(concurrent, cores)))
    return {k: str(share) for k in THREAD_ENV}


def _with_env(jobs: Sequence[NotebookJob], extra: dict) -> list[NotebookJob]:
    """The jobs with ``extra`` added to their environments (a job's own values win)."""
    return [replace(job, env={**extra, **job.env}) for job in jobs]


def run_job(job: NotebookJob, progress_bar: bool = False) -> JobResult:
    """Execute one job here; a failure is returned, not raised (the destination is left as it was)."""
    from .runner import execute_notebook

    t = time.perf_counter()
    try:
        execute_notebook(Path(job.source), Path(job.destination), dict(job.parameters), cwd=Path(job.cwd),
                         progress_bar=progress_bar, env=dict(job.env))
    except Exception as exc:  # noqa: BLE001 - reported with the job; the others go on
        return JobResult(job.label, job.destination, time.perf_counter() - t, f"{type(exc).__name__}: {exc}")
    return JobResult(job.label, job.destination, time.perf_counter() - t)


def auto_executor(device: str, jobs: int, cores: int | None = None, profile: str = "default") -> str:
    """``cores`` where the notebooks compute on the CPU (``device`` ``cpu``, or ``auto`` on a machine without CUDA)
    and there are at least two jobs and two cores; ``serial`` otherwise: a GPU's notebooks run one after another on
    it, with the progress bars in this terminal, and so does the ``paper`` profile, whose CPU run was measured one
    notebook after another (37 to 64 minutes on two cores, half of it one figure's: with one thread per notebook
    that figure alone could take longer than the serial run; ``--executor cores`` asks for the pool anyway)."""
    cores = usable_cores() if cores is None else cores
    if jobs < 2 or cores < 2 or profile == "paper":
        return "serial"
    if device == "auto":
        try:
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            device = "cpu"
    return "cores" if device == "cpu" else "serial"


def _run_in_subprocess(job: NotebookJob, env: dict, started: Callable[[subprocess.Popen], None] | None = None
                       ) -> JobResult:
    """``python -m softmax_icl.book.dispatch`` with the job as JSON on stdin (its own process: its own environment).
    ``started`` receives the process once it runs (so a caller can stop it)."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "softmax_icl.book.dispatch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})
    if started is not None:
        started(proc)
    stdout, stderr = proc.communicate(json.dumps(asdict(job)))
    try:
        return JobResult(**json.loads(stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError, TypeError):
        return JobResult(job.label, job.destination, time.perf_counter() - t,
                         f"job process exited with {proc.returncode}: {stderr[-2000:]}")


def visible_gpus() -> list[str]:
    """The local GPUs: ``CUDA_VISIBLE_DEVICES`` when set, else every device torch sees."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def _gpu_pool(jobs: Sequence[NotebookJob], devices: Sequence[str]) -> list[JobResult]:
    if not devices:
        raise RuntimeError("executor 'gpus': no GPU visible (CUDA_VISIBLE_DEVICES / torch.cuda.device_count())")
    free: queue.Queue = queue.Queue()
    for d in devices:
        free.put(d)

    def one(job: NotebookJob) -> JobResult:
        device = free.get()
        try:
            return _run_in_subprocess(job, {"CUDA_VISIBLE_DEVICES": device})
        finally:
            free.put(device)

    with ThreadPoolExecutor(max_workers=len(devices)) as pool:
        return list(pool.map(one, jobs))


#: Run before the ``cores`` pool's notebooks (each process would otherwise compile the engine it loads first, at the
#: same time as the others): both compiled engines built at once (:mod:`softmax_icl.engine.build`).
ENGINE_BUILD = (sys.executable, "-m", "softmax_icl.engine.build")
#: Seconds between the ``cores`` pool's lines on what is running.
HEARTBEAT_S = 60.0


def _training_status(path: Path) -> str:
    """The training loop's last line in a job's progress file (``desc<TAB>step<TAB>total``), as ``desc step/total``."""
    try:
        desc, step, total = path.read_text().strip().split("\t")
        return desc if total == "0" else f"{desc} {step}/{total}"      # total 0: a message (an engine compiles)
    except (OSError, ValueError):
        return ""


def _core_pool(jobs: Sequence[NotebookJob], workers: int | None = None, expected: Sequence[float] | None = None,
               build_engines: bool = True, out=None, heartbeat_s: float = HEARTBEAT_S) -> list[JobResult]:
    """Run ``jobs`` as subprocesses, ``workers`` (default: the usable cores, at most one per job) at once, each with
    an even share of the cores as its thread count (:func:`thread_share`); the job with the largest ``expected``
    seconds first (the order of ``jobs`` breaks ties). With ``build_engines`` the compiled CPU engines are built
    first (:data:`ENGINE_BUILD`), and the notebooks start once they are there (a build that fails is reported; the
    notebooks then fall back to PyTorch as they would anyway). Results in the order of ``jobs``; a failed job does
    not stop the others.

    Ctrl-C (or SIGTERM to this process) starts no further job and stops the running ones the way Ctrl-C stops a
    notebook (each keeps its previous notebook and leaves the partial one as ``.failed``), then raises
    KeyboardInterrupt."""
    out = out or sys.stdout
    jobs = list(jobs)
    workers = max(1, min(workers or usable_cores(), max(1, len(jobs))))
    share = thread_share(workers)
    jobs = _with_env(jobs, share)
    expected = list(expected) if expected is not None else [0.0] * len(jobs)
    order = sorted(range(len(jobs)), key=lambda i: -expected[i])
    results: list[JobResult | None] = [None] * len(jobs)
    t0 = time.monotonic()
    lock = threading.Lock()
    running: dict[str, tuple[float, Path]] = {}
    procs: set = set()
    stop = threading.Event()

    def say(text: str) -> None:
        with lock:
            print(f"  [{time.monotonic() - t0:5.0f} s] {text}", file=out, flush=True)

    def started(proc) -> None:
        with lock:
            procs.add(proc)
        if stop.is_set():                 # stopped while this one was starting
            proc.terminate()

    def build() -> None:
        proc = subprocess.Popen(list(ENGINE_BUILD), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **jobs[0].env, **share})
        started(proc)
        stdout, stderr = proc.communicate()
        with lock:
            procs.discard(proc)
        if stop.is_set():
            return
        lines = stdout.strip().splitlines()
        for line in lines:
            say(line + ("; the notebooks use PyTorch" if ": torch (" in line else ""))
        if proc.returncode != 0 or not lines:
            say(f"the engines were not built (exit status {proc.returncode}: {stderr.strip()[-300:]}); "
                "each notebook builds what it needs, or uses PyTorch")

    pending: queue.Queue = queue.Queue()
    for i in order:
        pending.put(i)

    def worker() -> None:
        while not stop.is_set():
            try:
                i = pending.get_nowait()
            except queue.Empty:
                return
            job = jobs[i]
            status = progress_dir / f"{i}.txt"
            with lock:
                running[job.label] = (time.monotonic(), status)
            say(f"started {job.label} ({_threads_text(job.env)})")
            results[i] = r = _run_in_subprocess(job, {**job.env, "SOFTMAX_ICL_PROGRESS_FILE": str(status)}, started)
            with lock:
                running.pop(job.label, None)
                procs.difference_update({p for p in procs if p.poll() is not None})
            say(f"{r.label}: " + (f"{r.seconds:.0f} s" if r.ok else f"FAILED after {r.seconds:.0f} s"))

    def heartbeat() -> None:
        while not stop.wait(heartbeat_s):
            with lock:
                now = [(label, time.monotonic() - start, _training_status(path))
                       for label, (start, path) in running.items()]
            if now:
                say("running: " + "; ".join(f"{label} {sec:.0f} s" + (f" ({st})" if st else "")
                                            for label, sec, st in now))

    def run_threads(target, args_list) -> None:
        threads = [threading.Thread(target=target, args=a, daemon=True) for a in args_list]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():           # a join with a timeout, so Ctrl-C reaches this (main) thread
                t.join(0.2)

    def interrupt(signum, frame):
        from .runner import Terminated

        raise Terminated(f"stopped by signal {signum} (SIGTERM)")

    def wait(alive, seconds) -> list:
        end = time.monotonic() + seconds
        for p in alive:
            try:
                p.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        return [p for p in alive if p.poll() is None]

    main = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM")
    previous = signal.signal(signal.SIGTERM, interrupt) if main else None
    progress_dir = Path(tempfile.mkdtemp(prefix="softmax-icl-progress-"))
    beat = threading.Thread(target=heartbeat, daemon=True)
    try:
        if build_engines and jobs:
            say("building the compiled engines before the notebooks")
            run_threads(build, [()])
        beat.start()
        run_threads(worker, [()] * workers)
    except KeyboardInterrupt:
        stop.set()
        with lock:
            alive = [p for p in procs if p.poll() is None]
        say(f"stopping: {len(alive)} running process(es) end the way Ctrl-C ends a notebook (each keeps its "
            "previous notebook); no further job starts")
        # Ctrl-C in a terminal reaches the jobs too; a SIGTERM here (or a SIGINT sent to this process alone) does
        # not: what is still running after a few seconds gets a SIGTERM, which a job ends like Ctrl-C
        for p in wait(alive, 5.0):
            p.send_signal(signal.SIGTERM)
        for p in wait(alive, 60.0):
            p.kill()
        raise
    finally:
        stop.set()
        if main:
            signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(progress_dir, ignore_errors=True)
    return [r for r in results if r is not None]


def _threads_text(env: dict) -> str:
    """How many threads a job runs (its ``OMP_NUM_THREADS``), for the pool's lines."""
    n = env.get("OMP_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    return f"{n} thread{'s' if n != '1' else ''}" if n else "threads: the libraries' default"


def submitit_executor(kind: str, folder: Path, timeout_min: int = 120, slurm_partition: str | None = None,
                      slurm_gpus_per_node: int | None = None, cpus_per_task: int | None = None):
    """A ``submitit`` executor: ``LocalExecutor`` for ``local``, ``AutoExecutor`` on Slurm for ``slurm``."""
    import submitit

    if kind == "local":
        ex = submitit.LocalExecutor(folder=str(folder))
        ex.update_parameters(timeout_min=timeout_min)
        return ex
    ex = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
    params: dict[str, Any] = {"timeout_min": timeout_min, "name": "softmax-icl"}
    if slurm_partition:
        params["slurm_partition"] = slurm_partition
    if slurm_gpus_per_node is not None:
        params["gpus_per_node"] = slurm_gpus_per_node
    if cpus_per_task is not None:
        params["cpus_per_task"] = cpus_per_task
    ex.update_parameters(**params)
    return ex


def submit_all(fn: Callable[[Any], Any], items: Sequence[Any], executor) -> list[Any]:
    """``fn`` over ``items`` through a submitit executor (every item its own job); results in order."""
    jobs = [executor.submit(fn, item) for item in items]
    return [job.result() for job in jobs]


def run_jobs(jobs: Sequence[NotebookJob], executor: str = "serial", folder: Path | None = None,
             devices: Sequence[str] | None = None, **options) -> list[JobResult]:
    """Run every job through ``executor`` (one of :data:`EXECUTORS`); results in the order of ``jobs``.

    ``folder`` holds submitit's logs and pickles (default: a temporary one); ``options`` go to
    :func:`submitit_executor` (``timeout_min``, ``slurm_partition``, ``slurm_gpus_per_node``, ``cpus_per_task``).
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor {executor!r} is not allowed; allowed values: {', '.join(EXECUTORS)}")
    jobs = list(jobs)
    if executor == "auto":
        executor = auto_executor(devices_hint(jobs), len(jobs), profile=profile_hint(jobs))
    if executor == "serial":
        return [run_job(job, progress_bar=True) for job in jobs]
    if executor == "cores":
        return _core_pool(jobs, options.get("workers"), options.get("expected"),
                          options.get("build_engines", True), options.get("out"),
                          options.get("heartbeat_s", HEARTBEAT_S))
    if executor == "gpus":
        devices = list(devices) if devices is not None else visible_gpus()
        return _gpu_pool(_with_env(jobs, thread_share(len(devices))), devices)
    if executor == "local":                   # every job at once, on this machine's cores
        jobs = _with_env(jobs, thread_share(len(jobs)))
    if folder is None:
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="softmax-icl-submitit-"))
    return submit_all(run_job, jobs, submitit_executor(executor, Path(folder), **options))


def expected_seconds(root: Path, job) -> float:
    """How long a figure's stages took last time at the job's profile (the sum of its committed record's
    ``compute_seconds``; 0 when there is none): the ``cores`` executor starts the longest first."""
    from .scales import PAPER_SUBDIR

    name, profile = job.label.split()[0], job.parameters.get("profile", "default")
    folder = root / "book" / "results" / (PAPER_SUBDIR if profile == PAPER_SUBDIR else "")
    try:
        seconds = json.loads((folder / f"{name}.json").read_text()).get("compute_seconds") or {}
        return float(sum(seconds.values()) if isinstance(seconds, dict) else seconds)
    except (OSError, ValueError, TypeError, AttributeError):
        return 0.0


def devices_hint(jobs: Sequence[NotebookJob]) -> str:
    """The device the jobs' notebooks ask for (their ``device`` parameter; ``auto`` when they differ or say none)."""
    devices = {str(j.parameters.get("device", "auto")) for j in jobs}
    return devices.pop() if len(devices) == 1 else "auto"


def profile_hint(jobs: Sequence[NotebookJob]) -> str:
    """The profile the jobs' notebooks run at (``default`` when they differ or say none)."""
    profiles = {str(j.parameters.get("profile", "default")) for j in jobs}
    return profiles.pop() if len(profiles) == 1 else "default"


def _main() -> int:
    """Entry of a ``gpus`` job process: a NotebookJob as JSON on stdin, its JobResult as JSON on stdout."""
    job = NotebookJob(**json.loads(sys.stdin.read()))
    result = run_job(job)
    print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
