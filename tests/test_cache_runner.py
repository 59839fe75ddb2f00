"""The result cache and the notebook runner never leave a half-written file in place of a good one."""

import json
import os
import pickle
from types import SimpleNamespace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from softmax_icl import base
from softmax_icl.book import cache, provenance
from softmax_icl.book import run as run_module
from softmax_icl.book.run import Run
from softmax_icl.book.runner import HIDE_TAG, NotebookFailed, execute_notebook
from softmax_icl.figures import FIGURES
from softmax_icl.figures import main as cli_main


def test_cache_hit_miss_and_bypass(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTMAX_ICL_CACHE_DIR", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"value": len(calls)}

    v1, hit1 = cache.cached("t", {"a": 1}, "cpu", compute)
    v2, hit2 = cache.cached("t", {"a": 1}, "cpu", compute)
    v3, hit3 = cache.cached("t", {"a": 2}, "cpu", compute)
    v4, hit4 = cache.cached("t", {"a": 1}, "cuda", compute)
    v5, hit5 = cache.cached("t", {"a": 1}, "cpu", compute, use_cache=False)
    assert (hit1, hit2, hit3, hit4, hit5) == (False, True, False, False, False)
    assert v1 == v2 == {"value": 1} and v3 == {"value": 2} and v5 == {"value": 4}
    assert len(list(tmp_path.glob("*.pkl"))) == 3


def test_an_entry_keeps_what_its_computation_took_for_the_runs_that_read_it(tmp_path, monkeypatch):
    """A resumed run (a paper run stopped and started again) reads earlier stages from the cache; their compute time
    survives in <key>.meta.json, reaches the record as compute_seconds and the pages through cache_note."""
    from softmax_icl.book.scales import cache_note

    monkeypatch.setenv("SOFTMAX_ICL_CACHE_DIR", str(tmp_path / "cache"))
    ticks = iter([10.0, 13.5] + [100.0] * 50)
    monkeypatch.setattr(cache.time, "perf_counter", lambda: next(ticks))
    first, second = {}, {}
    assert cache.cached("t", {"a": 1}, "cpu", lambda: 7, info=first) == (7, False)
    assert first["seconds"] == 3.5 and first["computed_at"]
    assert cache.cached("t", {"a": 1}, "cpu", lambda: 8, info=second) == (7, True)
    assert second == first | {"seconds": 3.5}
    meta = json.loads(next((tmp_path / "cache").glob("*.meta.json")).read_text())
    assert meta["seconds"] == 3.5 and meta["tag"] == "t"
    next((tmp_path / "cache").glob("*.meta.json")).unlink()            # an entry from before this: time unknown
    third = {}
    assert cache.cached("t", {"a": 1}, "cpu", lambda: 9, info=third) == (7, True) and third["seconds"] is None
    monkeypatch.undo()

    monkeypatch.setenv("SOFTMAX_ICL_CACHE_DIR", str(tmp_path / "cache2"))
    for attempt in (1, 2):
        run = Run(FIGURES["window_adaptation"], "smoke", "cpu", output_dir=str(tmp_path / f"run{attempt}"))
        run.cached("train", {"x": 1}, lambda: sum(range(10**5)))
        run.cached("evaluate", {"x": 1}, lambda: 1)
        run.finish()
    rec = json.loads((tmp_path / "run2" / "results" / "window_adaptation.json").read_text())
    assert rec["cache_hits"] == {"train": True, "evaluate": True}
    assert set(rec["compute_seconds"]) == {"train", "evaluate"} and all(v >= 0 for v in rec["compute_seconds"].values())
    took = sum(rec["compute_seconds"].values())
    assert cache_note(rec) == f" (2 of 2 stages read from the result cache; computing its 2 stages took {took:.0f} s)"
    rec["compute_seconds"]["train"] = None
    assert cache_note(rec) == " (2 of 2 stages read from the result cache)"
    for meta in (tmp_path / "cache2").glob("*.meta.json"):             # entries from before the cache kept times
        meta.unlink()
    run = Run(FIGURES["window_adaptation"], "smoke", "cpu", output_dir=str(tmp_path / "run3"))
    assert run.cached("train", {"x": 1}, lambda: None) == sum(range(10**5))
    assert run.compute_seconds == {"train": None}
    run.cached("trained", {"x": 2}, lambda: SimpleNamespace(timings={"train_seconds": 12.345}))
    for meta in (tmp_path / "cache2").glob("*.meta.json"):
        meta.unlink()
    run.cached("trained", {"x": 2}, lambda: None)
    assert run.cache_hits["trained"] and run.compute_seconds["trained"] == 12.35   # a trained result's own time


def test_failed_computation_writes_no_cache_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTMAX_ICL_CACHE_DIR", str(tmp_path))

    def fail():
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        cache.cached("t", {"a": 1}, "cpu", fail)
    assert [p for p in tmp_path.iterdir() if p.name != "kernels"] == []   # the engines' build folder is no entry


def test_atomic_write_keeps_old_file_when_writing_fails(tmp_path, monkeypatch):
    target = tmp_path / "entry.pkl"
    base.atomic_write_bytes(target, pickle.dumps("good"))

    def broken_replace(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(KeyboardInterrupt):
        base.atomic_write_bytes(target, pickle.dumps("new"))
    monkeypatch.undo()
    assert pickle.loads(target.read_bytes()) == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["entry.pkl"]        # no temporary file left behind


def test_atomic_write_gives_the_file_the_usual_mode_not_a_private_one(tmp_path):
    """mkstemp's temporary file is 0600; the written file gets 0666 less the umask, like any new file (records,
    pages and a cache shared between users must be readable)."""
    old = os.umask(0o022)
    try:
        base.atomic_write_bytes(tmp_path / "record.json", b"{}")
    finally:
        os.umask(old)
    assert (tmp_path / "record.json").stat().st_mode & 0o777 == 0o644


def test_corrupt_cache_entry_is_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTMAX_ICL_CACHE_DIR", str(tmp_path))
    path = tmp_path / f"{cache.cache_key('t', {'a': 1}, 'cpu')}.pkl"
    path.write_bytes(b"truncated")
    v, hit = cache.cached("t", {"a": 1}, "cpu", lambda: 42)
    assert (v, hit) == (42, False) and pickle.loads(path.read_bytes()) == 42


def _notebook(path, body):
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = new_code_cell("x = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, new_code_cell(body)]
    nbformat.write(nb, path)


def test_runner_replaces_on_success_and_hides_injected_parameters(tmp_path):
    src = tmp_path / "fig.ipynb"
    _notebook(src, "print(x * 2)")
    execute_notebook(src, src, {"x": 21}, progress_bar=False)
    nb = nbformat.read(src, as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and HIDE_TAG in injected[0].metadata["tags"]
    assert nb.cells[-1].outputs[0]["text"] == "42\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.ipynb"]


@pytest.mark.skipif(os.name != "posix", reason="Unix-domain sockets (ipc) are POSIX-only; elsewhere TCP is kept")
def test_the_kernel_talks_over_unix_sockets_not_tcp(tmp_path, capfd):
    """No TCP port for the kernel, so ipykernel has nothing to warn about; the kernel's own stderr is captured."""
    src = tmp_path / "fig.ipynb"
    _notebook(src, "import json\nfrom ipykernel import get_connection_info\n"
                   "print(json.dumps(json.loads(get_connection_info())['transport']))")
    execute_notebook(src, src, {"x": 1}, progress_bar=False)
    assert nbformat.read(src, as_version=4).cells[-1].outputs[0]["text"] == '"ipc"\n'
    assert "without encryption" not in capfd.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.ipynb"]        # no socket files left beside it


def test_runner_leaves_previous_notebook_intact_when_execution_fails(tmp_path):
    src = tmp_path / "fig.ipynb"
    _notebook(src, "assert x == 1, 'bad parameter'\nprint('ok')")
    execute_notebook(src, src, {"x": 1}, progress_bar=False)
    good = src.read_bytes()
    with pytest.raises(NotebookFailed, match="left unchanged"):
        execute_notebook(src, src, {"x": 2}, progress_bar=False)
    assert src.read_bytes() == good                                   # the good notebook survived
    failed = tmp_path / "fig.failed.ipynb"
    assert failed.exists()                                            # the partial run is kept for inspection
    assert not list(tmp_path.glob(".*.running.ipynb"))


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM to a child process: POSIX")
def test_a_run_stopped_by_sigterm_keeps_its_partial_notebook_and_the_good_one(tmp_path):
    """kill / a scheduler's time limit ends a run like Ctrl-C: the destination is untouched, the partial run is kept
    as .failed, no hidden temporary is left, and the kernel is shut down."""
    import signal
    import subprocess
    import sys
    import time

    src, started = tmp_path / "fig.ipynb", tmp_path / "started"
    _notebook(src, f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(120)")
    dest = tmp_path / "out" / "fig.ipynb"
    dest.parent.mkdir()
    dest.write_text("good")
    code = ("from pathlib import Path; from softmax_icl.book.runner import execute_notebook; "
            f"execute_notebook(Path({str(src)!r}), Path({str(dest)!r}), {{}}, progress_bar=False)")
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert started.exists(), "the notebook never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "SIGTERM" in err
    assert dest.read_text() == "good"
    assert (tmp_path / "out" / "fig.failed.ipynb").exists()
    assert not list((tmp_path / "out").glob(".*.running.ipynb"))


def test_training_progress_goes_to_the_status_file_not_to_stdout(tmp_path, monkeypatch, capsys):
    import torch

    from softmax_icl.base import PROGRESS_FILE_ENV, optimise

    status = tmp_path / "status"
    monkeypatch.setenv(PROGRESS_FILE_ENV, str(status))
    w = torch.zeros(2, requires_grad=True)
    optimise([w], lambda: (w - 1) ** 2, steps=7, lr=0.1, log_every=3, snapshot=lambda: {}, progress=False,
             desc="unit test")
    assert status.read_text() == "unit test\t7\t7\n"
    assert capsys.readouterr().err == ""


def test_cli_runs_show_training_progress_without_storing_it(tmp_path):
    """With progress_bar=True the kernel gets a status file (for the terminal's bar); stored outputs stay clean."""
    src = tmp_path / "fig.ipynb"
    _notebook(src, "import os\nfrom softmax_icl.base import Progress\np = Progress(3, 'unit')\n"
                   "for i in (1, 2, 3):\n    p.update(i)\np.close()\n"
                   "print(os.environ.get('SOFTMAX_ICL_PROGRESS_FILE') is not None, os.environ['SOFTMAX_ICL_PROGRESS'])")
    execute_notebook(src, src, {"x": 1}, progress_bar=True)
    outputs = nbformat.read(src, as_version=4).cells[-1].outputs
    assert [o.get("name") for o in outputs] == ["stdout"] and outputs[0]["text"] == "True 0\n"
    execute_notebook(src, src, {"x": 1}, progress_bar=False)
    assert nbformat.read(src, as_version=4).cells[-1].outputs[0]["text"] == "False 0\n"


def test_a_runs_provenance_names_the_revision_it_started_with(tmp_path, monkeypatch):
    """The code is loaded when the run starts: a commit made while it runs must not appear in its record."""
    monkeypatch.setattr(run_module, "git_revision", lambda: "aaaaaaa")
    run = Run(FIGURES["window_adaptation"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
    monkeypatch.setattr(run_module, "git_revision", lambda: "bbbbbbb")
    run.finish()
    rec = json.loads((tmp_path / "results" / "window_adaptation.json").read_text())
    assert rec["provenance"]["git_revision"] == "aaaaaaa"


# -- where a run writes: never the book unless asked ---------------------------------------------------------------

def _checkout(tmp_path):
    """A minimal checkout: _config.yml, notebooks/, book/ (the markers softmax_icl looks for)."""
    (tmp_path / "_config.yml").write_text("title: test\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "book" / "results").mkdir(parents=True)
    return tmp_path


def test_a_run_without_an_output_dir_writes_to_runs_never_the_book(tmp_path, monkeypatch, capsys):
    root = _checkout(tmp_path)
    monkeypatch.delenv("SOFTMAX_ICL_OUTPUT_DIR", raising=False)
    monkeypatch.chdir(root / "notebooks")
    for profile, overrides, folder in (("smoke", None, "window_adaptation-smoke"),
                                       ("default", None, "window_adaptation-default"),
                                       ("default", {"sigma": 0.7}, "window_adaptation-default-custom")):
        run = Run(FIGURES["window_adaptation"], profile, "cpu", use_cache=False, overrides=overrides)
        assert run.output_dir == root / "runs" / folder
        run.finish()
        assert (root / "runs" / folder / "results" / "window_adaptation.json").is_file()
        assert f"runs/{folder}/ (not the book)" in capsys.readouterr().out
    assert list((root / "book").rglob("*.*")) == []


def test_finish_prints_verdicts_without_values_and_values_apart(tmp_path, monkeypatch):
    run = Run(FIGURES["window_adaptation"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
    run.check("softmax-near-oracle", "something rises", 1.23456, True, "> 1", kind="claim",
              source="Collins et al. Fig. 2", ledger="nn-window")
    run.check("a-control", "the same against the wrong counterpart", 0.5, False, "> 1", kind="control",
              source="beyond the papers", control_of="softmax-near-oracle")
    text = run.finish()
    assert "1.23" not in text and "0.5" not in text
    assert text.splitlines()[0] == "PASS  softmax-near-oracle: something rises -- required > 1"
    assert "1/1 claims hold" in text and "1/1 controls fail, as they must" in text
    assert run.values_table().splitlines() == ["softmax-near-oracle: 1.23 (required > 1)",
                                               "a-control: 0.5 (required > 1)"]
    rec = json.loads((tmp_path / "results" / "window_adaptation.json").read_text())
    assert rec["claims"][0]["value"] == 1.23456 and rec["claims"][0]["source"] == "Collins et al. Fig. 2"
    assert rec["claims"][0]["ledger"] == "nn-window"


def test_a_claim_check_names_the_ledger_entry_that_lists_it(tmp_path):
    """A check of kind claim without a ledger entry, or naming an entry that does not list it, is refused before it
    is recorded; so is a control naming an entry (it belongs to the check it controls)."""
    run = Run(FIGURES["window_adaptation"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
    kw = dict(kind="claim", source="Collins et al.")
    with pytest.raises(ValueError, match="names no ledger entry"):
        run.check("softmax-near-oracle", "x", 1, True, "> 0", **kw)
    with pytest.raises(ValueError, match="do not list it"):
        run.check("softmax-near-oracle", "x", 1, True, "> 0", ledger="window-widens", **kw)
    with pytest.raises(ValueError, match="do not list it"):
        run.check("not-in-the-ledger", "x", 1, True, "> 0", ledger="nn-window", **kw)
    with pytest.raises(ValueError, match="a control belongs"):
        run.check("c", "x", 1, False, "> 0", kind="control", source="s", control_of="softmax-near-oracle",
                  ledger="nn-window")
    assert run.claims == []


def test_a_plain_papermill_run_does_not_touch_the_book(tmp_path, monkeypatch):
    """What the README's users do: papermill notebooks/x.ipynb out.ipynb -p profile smoke."""
    root = _checkout(tmp_path)
    monkeypatch.delenv("SOFTMAX_ICL_OUTPUT_DIR", raising=False)
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = new_code_cell('profile = "default"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, new_code_cell('from softmax_icl.book.run import Run\n'
                                      'from softmax_icl.figures import window_adaptation\n'
                                      'run = Run(window_adaptation.FIGURE, profile, "cpu", use_cache=False)\n'
                                      'print(run.finish())')]
    src = root / "notebooks" / "window_adaptation.ipynb"
    nbformat.write(nb, src)
    execute_notebook(src, tmp_path / "out.ipynb", {"profile": "smoke"}, cwd=root / "notebooks", progress_bar=False)
    assert (root / "runs" / "window_adaptation-smoke" / "results" / "window_adaptation.json").is_file()
    assert list((root / "book").rglob("*.*")) == []
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[-1].outputs[0]["text"]
    assert "writes its record and figures to runs/window_adaptation-smoke/ (not the book)" in out


@pytest.mark.parametrize("argv", [["--profile", "smoke"], ["-p", "sigma", "0.5"]])
def test_in_place_only_at_the_books_own_settings(argv, capsys, monkeypatch):
    from pathlib import Path

    monkeypatch.setattr("softmax_icl.book.runner.execute_notebook", lambda *a, **k: pytest.fail("executed"))
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    assert cli_main(["run", "window_adaptation", "--in-place", *argv]) == 2
    assert "--in-place writes the book" in capsys.readouterr().err


# -- cache keys cover every computation they cache -----------------------------------------------------------------

@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of the package source that the cache fingerprints instead of the real one (edits stay in tmp)."""
    import shutil
    from pathlib import Path

    src = Path(cache.__file__).resolve().parents[1]
    dst = tmp_path / "softmax_icl"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache, "__file__", str(dst / "book" / "cache.py"))
    monkeypatch.setenv("SOFTMAX_ICL_CACHE_DIR", str(tmp_path / "cache"))
    return dst


def test_editing_a_figures_computation_makes_its_cache_miss(package_copy):
    """Figure-level computations (e.g. norm_scaling's population scans, through Run.cached -> cache.cached) are
    keyed by the fingerprint of figures/ too; plots.py, params.py, summary.py, answer.py and claims.py (drawing,
    parameters, text and verdicts from computed results) are not part of it."""
    assert any(p.parent.name == "norm_scaling" for p in cache.compute_files())
    computed = []

    def compute():
        computed.append(1)
        return len(computed)

    def run():
        return cache.cached("norm_scaling-population-scans", {"L": 1.0}, "cpu", compute)

    assert run() == (1, False) and run() == (1, True)
    for name in ("plots.py", "params.py", "claims.py"):    # restyling a plot, re-deciding a check keep the cache
        path = package_copy / "figures" / "norm_scaling" / name
        if path.exists():
            path.write_text(path.read_text() + "\n# restyled\n")
    assert run() == (1, True)
    analysis = package_copy / "figures" / "norm_scaling" / "analysis.py"
    analysis.write_text(analysis.read_text() + "\n# the computation changed\n")
    assert run() == (2, False)                             # a miss: recomputed under the new code
    theory = package_copy / "theory" / "population.py"
    theory.write_text(theory.read_text() + "\n# changed\n")
    assert run() == (3, False)


def test_a_figures_fingerprint_covers_its_own_folder_and_the_folders_it_imports_only(package_copy):
    """Run.cached keys an entry with its figure's code: the shared modules, figures/<figure>/ and the compute folders
    it imports (classification/ for the classification chapter), so editing one chapter leaves the others cached."""
    def figure_folders(figure):
        parts = [p.relative_to(package_copy).parts for p in cache.compute_files(figure)]
        return {q[:2] for q in parts if q[0] == "figures"}

    trees = {f: figure_folders(f) for f in ("norm_scaling", "classification_kernel_gd")}
    assert trees["norm_scaling"] == {("figures", "norm_scaling")}
    assert trees["classification_kernel_gd"] == {("figures", "classification_kernel_gd")}
    assert any(p.parent.name == "classification" for p in cache.compute_files("classification_kernel_gd"))
    assert not any(p.parent.name == "classification" for p in cache.compute_files("norm_scaling"))
    assert set(cache.compute_files("nope")) == set(cache.compute_files())       # unknown figure: every file
    computed = []

    def run(figure):
        return cache.cached(f"{figure}-stage", {"L": 1.0}, "cpu", lambda: computed.append(figure) or len(computed),
                            figure=figure)

    assert run("norm_scaling") == (1, False) and run("classification_kernel_gd") == (2, False)
    cls = package_copy / "classification" / "tasks.py"
    cls.write_text(cls.read_text() + "\n# changed\n")
    assert run("norm_scaling") == (1, True)                   # another figure's code: still cached
    assert run("classification_kernel_gd") == (3, False)      # its imported folder changed: recomputed
    own = package_copy / "figures" / "norm_scaling" / "analysis.py"
    own.write_text(own.read_text() + "\n# changed\n")
    assert run("classification_kernel_gd") == (3, True) and run("norm_scaling") == (4, False)
    (package_copy / "figures" / "low_rank" / "zz_new.py").write_text("from ..norm_scaling import analysis\n")
    assert any(p.parent.name == "norm_scaling" for p in cache.compute_files("low_rank"))   # imported folder
    (package_copy / "tasks.py").write_text((package_copy / "tasks.py").read_text() + "\n# changed\n")
    assert run("norm_scaling") == (5, False) and run("classification_kernel_gd") == (6, False)   # both import it


def test_a_shared_module_re_keys_only_the_figures_whose_code_imports_it(package_copy):
    """The shared modules in a figure's fingerprint are those its code reaches through imports (at any depth, and
    through the shared modules' own imports; regression.c comes with engine/regression.py)."""
    def shared(figure):
        return {p.relative_to(package_copy).as_posix() for p in cache.compute_files(figure)
                if p.parent == package_copy or p.parent.name in ("engine", "theory")}

    assert "theory/__init__.py" not in shared("window_adaptation") and "theory/__init__.py" in shared("norm_scaling")
    assert "theory/population.py" in shared("classification_kernel_gd")             # refine_minimum
    assert {f"theory/{m}.py" for m in ("theorem34", "fits", "matrices", "population", "window_scan")} \
        <= shared("norm_scaling")                              # the package's modules, through its __init__
    assert "training.py" not in shared("classification_kernel_gd") and "training.py" in shared("low_rank")
    assert {"engine/regression.py", "engine/regression.c", "engine/philox.h", "streams.py"} <= shared("low_rank")
    computed = []

    def run(figure):
        return cache.cached(f"{figure}-stage", {"L": 1.0}, "cpu", lambda: computed.append(figure) or len(computed),
                            figure=figure)

    figs = ("window_adaptation", "norm_scaling", "classification_kernel_gd")
    assert [run(f) for f in figs] == [(1, False), (2, False), (3, False)]
    theory = package_copy / "theory" / "fits.py"
    theory.write_text(theory.read_text() + "\n# changed\n")
    assert [run(f) for f in figs] == [(1, True), (4, False), (5, False)]
    training = package_copy / "training.py"
    training.write_text(training.read_text() + "\n# changed\n")
    assert [run(f) for f in figs] == [(6, False), (7, False), (5, True)]
    # a new import inside a function of a figure's code brings the module in
    own = package_copy / "figures" / "window_adaptation" / "analysis.py"
    own.write_text(own.read_text() + "\n\ndef _later():\n    from ... import theory\n    return theory\n")
    assert "theory/__init__.py" in shared("window_adaptation")
    engine = package_copy / "engine" / "regression.c"
    engine.write_text(engine.read_text() + "\n/* changed */\n")
    assert [run(f) for f in figs] == [(8, False), (9, False), (10, False)]


def test_a_missing_compute_module_is_an_error_not_a_skip(package_copy):
    (package_copy / "training.py").unlink()
    with pytest.raises(FileNotFoundError, match="training.py"):
        cache.cached("t", {"a": 1}, "cpu", lambda: 1)


def test_git_revision_of_a_copied_tree_is_stated_or_unknown(monkeypatch, tmp_path):
    """A tree copied without its git metadata (to a GPU machine) records the revision the copier states, marked as
    stated, or 'unknown'; inside a checkout git's answer wins over the variable."""
    import subprocess

    real = subprocess.run

    def no_repo(cmd, *a, **k):
        return real(cmd, *a, **{**k, "cwd": tmp_path})            # git run outside any repository: empty answer

    monkeypatch.setattr(provenance.subprocess, "run", no_repo)
    monkeypatch.delenv(provenance.REVISION_ENV, raising=False)
    assert provenance.git_revision() == "unknown"
    monkeypatch.setenv(provenance.REVISION_ENV, "abc1234")
    assert provenance.git_revision() == "abc1234 (stated)"
    monkeypatch.setattr(provenance.subprocess, "run", real)
    assert "(stated)" not in provenance.git_revision()
