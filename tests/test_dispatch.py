"""Independent notebook runs go to an existing executor (submitit's local executor here) and come back."""

import json
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from softmax_icl.book.dispatch import NotebookJob, run_jobs


def _job(tmp_path, label, x, body="import os, json\nprint(json.dumps({'x2': x * 2, "
                                   "'gpu': os.environ.get('CUDA_VISIBLE_DEVICES'), "
                                   "'cache': os.environ.get('SOFTMAX_ICL_CACHE_DIR'), "
                                   "'threads': os.environ.get('OMP_NUM_THREADS')}))"):
    src = tmp_path / "nb.ipynb"
    if not src.exists():
        nb = new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        params = new_code_cell("x = 0")
        params.metadata["tags"] = ["parameters"]
        nb.cells = [params, new_code_cell(body)]
        nbformat.write(nb, src)
    return NotebookJob(label=label, source=str(src), destination=str(tmp_path / label / "nb.ipynb"),
                       parameters={"x": x}, cwd=str(tmp_path), env={"SOFTMAX_ICL_CACHE_DIR": str(tmp_path / "cache")})


def _printed(result):
    cell = nbformat.read(result.destination, as_version=4).cells[-1]
    return json.loads(cell.outputs[0]["text"])


def test_two_notebook_runs_through_submitits_local_executor(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    from softmax_icl.book.dispatch import THREAD_ENV, usable_cores

    for k in THREAD_ENV:
        monkeypatch.delenv(k, raising=False)
    jobs = [_job(tmp_path, "a", 1), _job(tmp_path, "b", 20)]
    results = run_jobs(jobs, "local", folder=tmp_path / "submitit", timeout_min=5)
    assert [r.label for r in results] == ["a", "b"] and all(r.ok for r in results), results
    assert [_printed(r)["x2"] for r in results] == [2, 40]
    assert {_printed(r)["cache"] for r in results} == {str(tmp_path / "cache")}      # the shared cache reaches jobs
    # the two jobs run at once: each gets half the cores as its thread count, not all of them
    assert {_printed(r)["threads"] for r in results} == {str(max(1, usable_cores() // 2))}


@pytest.mark.parametrize("concurrent, cores, share", [(1, 16, 16), (2, 16, 8), (3, 16, 5), (5, 2, 1), (40, 16, 1),
                                                      (2, 1, 1), (0, 4, 4)])
def test_concurrent_jobs_share_the_cores(monkeypatch, concurrent, cores, share):
    from softmax_icl.book.dispatch import THREAD_ENV, thread_share

    for k in THREAD_ENV:
        monkeypatch.delenv(k, raising=False)
    assert thread_share(concurrent, cores) == {k: str(share) for k in THREAD_ENV}


def test_a_thread_count_set_by_the_user_is_kept(tmp_path, monkeypatch):
    """With OMP_NUM_THREADS set here, no share is imposed (the jobs inherit the user's value), and a job's own
    environment wins over the share."""
    from softmax_icl.book.dispatch import _with_env, thread_share

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert thread_share(2, 16) == {}
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    job = _job(tmp_path, "a", 1)
    mine = _with_env([job], {"OMP_NUM_THREADS": "1"})[0]
    assert mine.env["OMP_NUM_THREADS"] == "1" and mine.env["SOFTMAX_ICL_CACHE_DIR"] == str(tmp_path / "cache")
    kept = _with_env([NotebookJob(**{**job.__dict__, "env": {"OMP_NUM_THREADS": "4"}})], {"OMP_NUM_THREADS": "1"})
    assert kept[0].env["OMP_NUM_THREADS"] == "4"


def test_gpu_pool_gives_each_job_one_device_and_reports_failures(tmp_path, monkeypatch):
    """One worker per device; every job sees exactly one (no GPU needed: the notebook only reads the variable) and
    a share of the CPU cores."""
    from softmax_icl.book.dispatch import THREAD_ENV, usable_cores

    for k in THREAD_ENV:
        monkeypatch.delenv(k, raising=False)
    jobs = [_job(tmp_path, "a", 1), _job(tmp_path, "b", 2)]
    bad = NotebookJob("bad", str(tmp_path / "missing.ipynb"), str(tmp_path / "bad" / "nb.ipynb"), {}, str(tmp_path))
    results = run_jobs(jobs + [bad], "gpus", devices=["0", "1"])
    assert [r.ok for r in results] == [True, True, False] and "missing.ipynb" in results[-1].error
    assert {_printed(r)["gpu"] for r in results[:2]} <= {"0", "1"}
    assert [_printed(r)["x2"] for r in results[:2]] == [2, 4]
    assert {_printed(r)["threads"] for r in results[:2]} == {str(max(1, usable_cores() // 2))}   # two workers


def test_runner_names_the_same_environment_variables_as_base():
    from softmax_icl import base
    from softmax_icl.book import runner

    assert (runner.PROGRESS_ENV, runner.PROGRESS_FILE_ENV) == (base.PROGRESS_ENV, base.PROGRESS_FILE_ENV)
    assert runner.OUTPUT_DIR_ENV == base.OUTPUT_DIR_ENV


def test_unknown_executor_is_refused():
    with pytest.raises(ValueError, match="allowed values: auto, serial, cores, local, slurm, gpus"):
        run_jobs([], "threads")


def test_slurm_executor_takes_partition_gpus_and_time(tmp_path, monkeypatch):
    """What `--executor slurm --slurm-partition gpu --slurm-gpus-per-node 1 --time 30` asks of submitit (a fake
    `srun` on PATH stands in for the cluster; nothing is submitted)."""
    pytest.importorskip("submitit")
    from softmax_icl.book.dispatch import submitit_executor

    srun = tmp_path / "bin" / "srun"
    srun.parent.mkdir()
    srun.write_text("#!/bin/sh\nexit 0\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{srun.parent}:{__import__('os').environ['PATH']}")
    ex = submitit_executor("slurm", tmp_path / "logs", timeout_min=30, slurm_partition="gpu", slurm_gpus_per_node=1)
    params = ex._executor.parameters
    assert (params["partition"], params["gpus_per_node"], params["time"]) == ("gpu", 1, 30)


def test_core_pool_runs_the_longest_first_with_a_share_of_the_cores_and_reports_failures(tmp_path, monkeypatch):
    """The ``cores`` executor: one job per worker at a time, the largest expected time first, each with the cores
    shared among the workers as its thread count (:func:`thread_share`, tested above); a failure is reported with
    its job and the others still run; results come back in the order of the jobs."""
    import io

    from softmax_icl.book.dispatch import THREAD_ENV, usable_cores

    for k in THREAD_ENV:
        monkeypatch.delenv(k, raising=False)
    jobs = [_job(tmp_path, "short", 1), _job(tmp_path, "long", 2)]
    bad = NotebookJob("bad", str(tmp_path / "missing.ipynb"), str(tmp_path / "bad" / "nb.ipynb"), {}, str(tmp_path))
    out = io.StringIO()
    results = run_jobs([jobs[0], bad, jobs[1]], "cores", workers=1, expected=[1.0, 10.0, 30.0],
                       build_engines=False, out=out)
    assert [r.label for r in results] == ["short", "bad", "long"]
    assert [r.ok for r in results] == [True, False, True] and "missing.ipynb" in results[1].error
    assert [_printed(r)["x2"] for r in (results[0], results[2])] == [2, 4]
    started = [line.split("started ")[1].split(" (")[0] for line in out.getvalue().splitlines() if "started " in line]
    assert started == ["long", "bad", "short"]                           # one worker: strictly longest first
    assert "bad: FAILED" in out.getvalue()
    assert _printed(results[0])["threads"] == str(usable_cores())        # one worker: every core


def test_core_pool_builds_the_engines_first_and_shows_training_progress(tmp_path, monkeypatch):
    """The engines are built before any notebook starts (stand-ins here: the real ones take a minute to compile),
    a build that fails is reported and the notebooks still run, and the pool's periodic line shows what a running
    notebook's training loop last wrote to its progress file."""
    import io

    from softmax_icl.book import dispatch

    monkeypatch.setattr(dispatch, "ENGINE_BUILD", (sys.executable, "-c", "print('engine A: built (stand-in) (0 s)'); "
                                                   "print('engine B: torch (no C compiler found) (0 s)')"))
    body = ("import os, time\n"
            "open(os.environ['SOFTMAX_ICL_PROGRESS_FILE'], 'w').write('train_softmax\\t3\\t10\\n')\n"
            "time.sleep(3)\nprint('{}')")
    job = _job(tmp_path, "slow", 1, body=body)
    out = io.StringIO()
    [result] = dispatch.run_jobs([job], "cores", build_engines=True, out=out, heartbeat_s=0.5)
    text = out.getvalue()
    assert result.ok, result.error
    assert "engine A: built" in text and "engine B: torch (no C compiler found) (0 s); the notebooks use PyTorch" in text
    assert text.index("engine A: built") < text.index("started slow")
    assert "running: slow" in text and "(train_softmax 3/10)" in text


@pytest.mark.parametrize("device, jobs, cores, expected", [("cpu", 5, 2, "cores"), ("cpu", 5, 1, "serial"),
                                                           ("cpu", 1, 16, "serial"), ("cuda", 5, 16, "serial"),
                                                           ("cuda:1", 5, 16, "serial")])
def test_auto_executor_pools_cpu_runs_on_a_machine_with_cores_to_share(device, jobs, cores, expected):
    from softmax_icl.book.dispatch import auto_executor

    assert auto_executor(device, jobs, cores) == expected
    assert auto_executor(device, jobs, cores, profile="paper") == "serial"


def test_auto_executor_with_device_auto_follows_cuda(monkeypatch):
    import torch

    from softmax_icl.book.dispatch import auto_executor

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert auto_executor("auto", 5, 2) == "cores"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert auto_executor("auto", 5, 2) == "serial"


def test_expected_seconds_sum_the_last_records_stages(tmp_path):
    from softmax_icl.book.dispatch import expected_seconds

    (tmp_path / "book" / "results" / "paper").mkdir(parents=True)
    (tmp_path / "book" / "results" / "low_rank.json").write_text(json.dumps({"compute_seconds": {"a": 2, "b": 3.5}}))
    (tmp_path / "book" / "results" / "paper" / "low_rank.json").write_text(json.dumps({"compute_seconds": {"a": 60}}))
    job = lambda label, profile: NotebookJob(label, "s", "d", {"profile": profile}, str(tmp_path))  # noqa: E731
    assert expected_seconds(tmp_path, job("low_rank", "default")) == 5.5
    assert expected_seconds(tmp_path, job("low_rank set 2", "default")) == 5.5
    assert expected_seconds(tmp_path, job("low_rank", "paper")) == 60
    assert expected_seconds(tmp_path, job("window_adaptation", "default")) == 0.0       # no record yet


def test_core_pool_stops_on_sigterm_without_starting_another_job(tmp_path, monkeypatch):
    """SIGTERM to the process running the pool: the running notebook ends the way Ctrl-C ends it (nothing written
    to its destination), the next job never starts, and the pool raises KeyboardInterrupt."""
    import io
    import os
    import signal
    import threading

    from softmax_icl.book import dispatch

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    long_job = _job(tmp_path / "a", "long", 1, body="import time\ntime.sleep(60)")
    next_job = _job(tmp_path / "b", "next", 2)
    out = io.StringIO()

    def term_once_started():
        for _ in range(300):
            if "started long" in out.getvalue():
                break
            threading.Event().wait(0.1)
        threading.Event().wait(2.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=term_once_started, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        dispatch.run_jobs([long_job, next_job], "cores", workers=1, expected=[10, 1], build_engines=False, out=out)
    text = out.getvalue()
    assert "started long" in text and "started next" not in text and "stopping:" in text
    assert not (tmp_path / "a" / "long" / "nb.ipynb").exists()


def test_build_engines_reports_each_engine_and_never_fails(tmp_path):
    """``python -m softmax_icl.engine.build`` (make setup runs it beside pip, the cores executor before its
    notebooks, make test one engine per job): with the engines switched off it builds nothing and says so for each
    engine asked for, exit status 0; an unknown engine is refused."""
    import os
    import subprocess

    env = {**os.environ, "SOFTMAX_ICL_KERNEL": "torch", "SOFTMAX_ICL_CACHE_DIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "softmax_icl.engine.build"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["engine paper 1", "engine paper 2"]
    assert all("SOFTMAX_ICL_KERNEL=torch" in ln for ln in lines)
    one = subprocess.run([sys.executable, "-m", "softmax_icl.engine.build", "paper 2"], capture_output=True,
                         text=True, env=env, timeout=120)              # one engine (make test's engine jobs)
    assert one.returncode == 0 and [ln.split(":")[0] for ln in one.stdout.strip().splitlines()] == ["engine paper 2"]
    bad = subprocess.run([sys.executable, "-m", "softmax_icl.engine.build", "paper 3"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "allowed values: engine paper 1, engine paper 2" in bad.stderr
