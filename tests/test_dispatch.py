"""Independent notebook runs go to an existing executor (submitit's local executor here) and come back."""

import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from softmax_icl.dispatch import NotebookJob, run_jobs


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
    from softmax_icl.dispatch import THREAD_ENV, usable_cores

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
    from softmax_icl.dispatch import THREAD_ENV, thread_share

    for k in THREAD_ENV:
        monkeypatch.delenv(k, raising=False)
    assert thread_share(concurrent, cores) == {k: str(share) for k in THREAD_ENV}


def test_a_thread_count_set_by_the_user_is_kept(tmp_path, monkeypatch):
    """With OMP_NUM_THREADS set here, no share is imposed (the jobs inherit the user's value), and a job's own
    environment wins over the share."""
    from softmax_icl.dispatch import _with_env, thread_share

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
    from softmax_icl.dispatch import THREAD_ENV, usable_cores

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
    from softmax_icl import base, runner

    assert (runner.PROGRESS_ENV, runner.PROGRESS_FILE_ENV) == (base.PROGRESS_ENV, base.PROGRESS_FILE_ENV)


def test_unknown_executor_is_refused():
    with pytest.raises(ValueError, match="allowed values: serial, local, slurm, gpus"):
        run_jobs([], "threads")


def test_slurm_executor_takes_partition_gpus_and_time(tmp_path, monkeypatch):
    """What `--executor slurm --slurm-partition gpu --slurm-gpus-per-node 1 --time 30` asks of submitit (a fake
    `srun` on PATH stands in for the cluster; nothing is submitted)."""
    pytest.importorskip("submitit")
    from softmax_icl.dispatch import submitit_executor

    srun = tmp_path / "bin" / "srun"
    srun.parent.mkdir()
    srun.write_text("#!/bin/sh\nexit 0\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{srun.parent}:{__import__('os').environ['PATH']}")
    ex = submitit_executor("slurm", tmp_path / "logs", timeout_min=30, slurm_partition="gpu", slurm_gpus_per_node=1)
    params = ex._executor.parameters
    assert (params["partition"], params["gpus_per_node"], params["time"]) == ("gpu", 1, 30)
