"""Independent notebook runs (figures of a build, seed sets of an audit) sent to an existing executor.

Each run is a :class:`NotebookJob`: one notebook executed by :func:`softmax_icl.runner.execute_notebook` into its
own destination, with its own environment (where its record goes, the shared result cache). Nothing here schedules:

* ``serial``: one after another in this process (the default; the terminal shows the progress bars);
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
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

EXECUTORS = ("serial", "local", "slurm", "gpus")
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


def _run_in_subprocess(job: NotebookJob, env: dict) -> JobResult:
    """``python -m softmax_icl.dispatch`` with the job as JSON on stdin (its own process: its own environment)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "softmax_icl.dispatch"], input=json.dumps(asdict(job)),
                          capture_output=True, text=True, env={**os.environ, **env})
    try:
        return JobResult(**json.loads(proc.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError, TypeError):
        return JobResult(job.label, job.destination, time.perf_counter() - t,
                         f"job process exited with {proc.returncode}: {proc.stderr[-2000:]}")


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
    if executor == "serial":
        return [run_job(job, progress_bar=True) for job in jobs]
    if executor == "gpus":
        devices = list(devices) if devices is not None else visible_gpus()
        return _gpu_pool(_with_env(jobs, thread_share(len(devices))), devices)
    if executor == "local":                   # every job at once, on this machine's cores
        jobs = _with_env(jobs, thread_share(len(jobs)))
    if folder is None:
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="softmax-icl-submitit-"))
    return submit_all(run_job, jobs, submitit_executor(executor, Path(folder), **options))


def _main() -> int:
    """Entry of a ``gpus`` job process: a NotebookJob as JSON on stdin, its JobResult as JSON on stdout."""
    job = NotebookJob(**json.loads(sys.stdin.read()))
    result = run_job(job)
    print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
