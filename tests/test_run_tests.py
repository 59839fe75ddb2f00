"""tools/run_tests.py (`make test`'s runner): its jobs, their order, and what a failing job does."""

import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "run_tests.py"
spec = importlib.util.spec_from_file_location("run_tests", TOOL)
rt = importlib.util.module_from_spec(spec)
sys.modules["run_tests"] = rt
spec.loader.exec_module(rt)

NBS = ["notebooks/generalization.ipynb", "notebooks/low_rank.ipynb"]


def test_the_plan_has_every_pass_and_orders_the_jobs_on_their_predecessors(tmp_path):
    jobs = rt.plan(tmp_path, ["auto", "torch"], {"auto": NBS, "torch": NBS}, ["tests"], ["--nbval-lax"],
                   ["--durations=8"], threads=1)
    by = {j.name: j for j in jobs}
    assert {"unit tests", "unit tests/test_book_browser.py", "auto generalization", "torch low_rank",
            "auto regression"} <= set(by)
    assert "--ignore=tests/test_book_browser.py" in by["unit tests"].commands[0]
    # the compiled-engine notebooks and the unit tests wait for the engines; the PyTorch pass does not
    assert by["auto generalization"].after == ("engines shared",) == by["unit tests"].after
    assert by["torch generalization"].after == ()
    # the compiled-engine pass: nbval at the default profile, then its records held against the book's
    assert set(by["auto regression"].after) == {"auto generalization", "auto low_rank"}
    assert by["auto low_rank"].commands[0][-2:] == ["notebooks/low_rank.ipynb", "--nbval-lax"]
    # the PyTorch pass: one smoke run of each notebook through the command line, never held against the book
    cmd = by["torch low_rank"].commands[0]
    assert cmd[0].endswith("softmax-icl") and cmd[1:5] == ["run", "low_rank", "--profile", "smoke"]
    assert "torch regression" not in by and not any("test_regression" in " ".join(c) for j in jobs
                                                     if j.name.startswith("torch") for c in j.commands)
    assert by["torch low_rank"].env["SOFTMAX_ICL_KERNEL"] == "torch"
    assert by["auto low_rank"].env["SOFTMAX_ICL_CACHE_DIR"] != by["torch low_rank"].env["SOFTMAX_ICL_CACHE_DIR"]
    # at the start the compilations go first, then the longest ready job
    assert [j.name for j in rt._ready(jobs)][:3] == ["engine paper 1", "engine paper 2", "torch generalization"]


def test_every_job_runs_after_its_predecessors_and_a_failure_fails_the_run(tmp_path, capsys):
    mark = tmp_path / "order.txt"

    def sh(text):
        return [["bash", "-c", text]]

    jobs = [rt.Job("slow", sh(f"sleep 0.5; echo slow >> {mark}; echo out-of-slow"), expected=9),
            rt.Job("bad", sh(f"echo bad >> {mark}; echo out-of-bad; exit 3"), expected=1),
            rt.Job("join", [], after=("slow", "bad"), then=lambda: mark.open("a").write("join\n")),
            rt.Job("last", sh(f"echo last >> {mark}"), after=("join",))]
    assert rt.run(jobs, 2, tmp_path) == 1
    assert mark.read_text().split() == ["bad", "slow", "join", "last"]
    out = capsys.readouterr().out
    assert "== bad: failed" in out and "(exit status 3)" in out and "FAILED: bad" in out
    # each job's output comes in one block after its line
    assert out.index("== slow: passed") < out.index("out-of-slow") and out.index("out-of-bad") < out.index("== slow")
    assert [j.status for j in jobs] == ["passed", "failed", "passed", "passed"]


def test_under_a_bytecode_ban_the_jobs_keep_their_bytecode_in_the_run_s_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    jobs = rt.plan(tmp_path, ["torch"], {"torch": NBS[:1]}, ["tests"], [], [], threads=1)
    for j in (j for j in jobs if j.commands):          # every process a job starts
        assert j.env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "pycache")
        assert j.env["PYTHONDONTWRITEBYTECODE"] is None
    # without the ban, or with the user's own prefix, the environment's bytecode settings are left alone
    for ban, prefix in ((None, None), ("1", "/the/user/s/own")):
        for name, value in (("PYTHONDONTWRITEBYTECODE", ban), ("PYTHONPYCACHEPREFIX", prefix)):
            if value:
                monkeypatch.setenv(name, value)
            else:
                monkeypatch.delenv(name, raising=False)
        jobs = rt.plan(tmp_path, ["torch"], {"torch": NBS[:1]}, ["tests"], [], [], threads=1)
        assert not any({"PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE"} & set(j.env) for j in jobs)
    # a value None removes the variable from the job's environment; the others are set
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    out = tmp_path / "env.txt"
    job = rt.Job("env", [["bash", "-c", f"echo ${{PYTHONDONTWRITEBYTECODE-unset}} $PYTHONPYCACHEPREFIX > {out}"]],
                 {"PYTHONDONTWRITEBYTECODE": None, "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")})
    assert rt.run([job], 1, tmp_path) == 0
    assert out.read_text().split() == ["unset", str(tmp_path / "pyc")]


def test_one_worker_runs_the_jobs_one_at_a_time_longest_first(tmp_path):
    mark = tmp_path / "order.txt"
    jobs = [rt.Job(n, [["bash", "-c", f"echo {n} >> {mark}"]], expected=e) for n, e in [("a", 1), ("b", 5), ("c", 3)]]
    assert rt.run(jobs, 1, tmp_path) == 0
    assert mark.read_text().split() == ["b", "c", "a"]


def test_a_job_graph_with_an_unknown_predecessor_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown predecessors"):
        rt.run([rt.Job("a", [["true"]], after=("nope",))], 1, tmp_path)


def test_bad_arguments_are_refused_before_any_job(capsys):
    with pytest.raises(SystemExit):
        rt.main(["--workers", "0"])
    assert "--workers must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        rt.main(["--notebooks", "notebooks/nope.ipynb"])
    assert "no such notebook" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        rt.main(["--backends", "cuda"])
    assert "--backends: ['cuda'] not among ('auto', 'torch')" in capsys.readouterr().err


def test_the_makefiles_test_command_parses(tmp_path):
    """`make test`'s command line (as ``make -n`` prints it) is one that tools/run_tests.py accepts, with the
    Makefile's defaults arriving intact."""
    root = TOOL.parents[1]
    (tmp_path / "stamp").touch()                      # setup counts as done
    # (run inside `make test`, a sub-make would inherit its flags and print "Entering directory" lines)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    out = subprocess.run(["make", "-n", "test", f"STAMP={tmp_path}/stamp"], cwd=root, capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stdout.replace("\\\n", " ").splitlines() if "tools/run_tests.py" in ln][-1]
    argv = shlex.split(line)
    argv = argv[argv.index("tools/run_tests.py") + 1:]
    args = rt.parser().parse_args(argv)
    assert args.durations == "--durations=8" and args.nb_args.startswith("--nbval-lax") and args.unit == "tests"
    assert args.backends == ["auto", "torch"] and len(args.notebooks_torch) == 5
    assert args.notebooks_auto == args.notebooks_torch + ["book/tutorial.ipynb"]


def test_a_terminated_run_stops_its_jobs(tmp_path):
    """SIGTERM to the runner (a CI timeout) ends the jobs it started, not only the runner."""
    import signal
    import time
    pidfile = tmp_path / "pid"
    script = (f"import sys; sys.path.insert(0, {str(TOOL.parent)!r}); import run_tests as rt, pathlib\n"
              f"job = rt.Job('sleep', [['bash', '-c', 'echo $$ > {pidfile}; exec sleep 60']])\n"
              f"try:\n    rt.run([job], 1, pathlib.Path({str(tmp_path)!r}))\nexcept KeyboardInterrupt:\n"
              "    print('stopped')\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    job_pid = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    assert "stopped" in proc.communicate(timeout=20)[0]
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(job_pid, 0)


def test_engines_already_built_in_the_users_cache_are_copied_for_the_engine_jobs(tmp_path):
    """Libraries (not the compilers' temporary files) go to the engine jobs' fresh cache; no user cache, no copy."""
    user = tmp_path / "user" / "kernels"
    user.mkdir(parents=True)
    (user / "engine-0123456789abcdef.so").write_bytes(b"lib")
    (user / ".engine-tmp123.so").write_bytes(b"half")
    assert rt.seed_engines(tmp_path / "engines", user) == ["engine-0123456789abcdef.so"]
    assert sorted(p.name for p in (tmp_path / "engines" / "kernels").iterdir()) == ["engine-0123456789abcdef.so"]
    assert rt.seed_engines(tmp_path / "other", tmp_path / "missing") == []
