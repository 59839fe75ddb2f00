"""``softmax-icl run``: bad input stops before any compute, each run gets a folder of its own, the run reports what it
found, and a run stopped by Ctrl-C or SIGTERM ends with one line and leaves nothing of itself beside an earlier one."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from softmax_icl.book import cli
from softmax_icl.book.compare import run_report
from softmax_icl.figures import FIGURES
from softmax_icl.figures import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
FIGURE = "window_adaptation"


def _no_compute(monkeypatch):
    monkeypatch.setattr("softmax_icl.book.runner.execute_notebook",
                        lambda *a, **k: pytest.fail("a notebook was executed despite invalid input"))


# -- bad input: exit 2, naming the parameter, before any compute ---------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["-p", "L_values", "[2, 2, 2]"], "parameter 'L_values' = [2.0, 2.0, 2.0] gives 2.0 more than once"),
    (["-p", "n_values", "[8, 32, 8]"], "parameter 'n_values' = [8, 32, 8] gives 8 more than once"),
    (["-p", "seeds", "1"], "parameter 'seeds' = 1 is out of range; allowed: an integer >= 2"),
    (["-p", "function_class", "[relu, cosine]"], "parameter 'function_class' takes one value of type str, got the "
                                                 "list ['relu', 'cosine']"),
    (["-p", "n_values", "8"], "parameter 'n_values' must be a non-empty list of int, got 8 (a list is written"),
])
def test_bad_values_exit_2_naming_the_parameter(argv, message, capsys, monkeypatch, tmp_path):
    _no_compute(monkeypatch)
    assert cli_main(["run", FIGURE, *argv, "--output", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()              # refused before a folder was made


@pytest.mark.parametrize("figure", sorted(FIGURES))
def test_every_figure_needs_two_seeds(figure, capsys, monkeypatch, tmp_path):
    """One seed gives no interval: every check would report infinite bounds."""
    _no_compute(monkeypatch)
    assert cli_main(["run", figure, "-p", "seeds", "1", "--output", str(tmp_path)]) == 2
    assert "'seeds' = 1 is out of range; allowed: an integer >= 2" in capsys.readouterr().err
    assert all(FIGURES.resolve(figure, p)["seeds"] >= 2 for p in ("smoke", "default", "paper"))


def test_a_bad_value_is_refused_without_loading_torch(tmp_path):
    code = ("import sys; from softmax_icl.figures import main; "
            f"rc = main(['run', {FIGURE!r}, '-p', 'L_values', '[2, 2, 2]', '--output', {str(tmp_path)!r}]); "
            "print(rc, 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.stdout.split() == ["2", "False"] and "'L_values'" in proc.stderr


def test_an_output_folder_that_cannot_be_written_is_refused_before_compute(capsys, monkeypatch, tmp_path):
    _no_compute(monkeypatch)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert cli_main(["run", FIGURE, "--profile", "smoke", "--output", str(blocker / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("softmax-icl: --output ") and "cannot write there" in err and len(err.splitlines()) == 1


def test_an_output_folder_holding_a_run_needs_replace(capsys, monkeypatch, tmp_path):
    _no_compute(monkeypatch)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / f"{FIGURE}.json").write_text("{}")
    assert cli_main(["run", FIGURE, "--output", str(tmp_path)]) == 2
    assert "holds an earlier run of window_adaptation; allowed: another folder, or --replace" in \
        capsys.readouterr().err


def test_a_book_that_is_not_a_checkout_is_refused(capsys, monkeypatch, tmp_path):
    _no_compute(monkeypatch)
    assert cli_main(["run", FIGURE, "--book", str(tmp_path)]) == 2
    assert f"--book {tmp_path}: not the book's checkout" in capsys.readouterr().err
    monkeypatch.setenv(cli.BOOK_ENV, str(tmp_path))
    assert cli_main(["pages"]) == 2
    assert f"{cli.BOOK_ENV} {tmp_path}: not the book's checkout" in capsys.readouterr().err


def test_the_book_is_found_from_any_folder(monkeypatch, tmp_path):
    """Outside the checkout: --book, SOFTMAX_ICL_BOOK, else the checkout the package is installed from."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(cli.BOOK_ENV, raising=False)
    assert cli.project_root() == ROOT
    fake = _checkout(tmp_path / "other")
    assert cli.project_root(book=fake) == fake.resolve()
    monkeypatch.setenv(cli.BOOK_ENV, str(fake))
    assert cli.project_root() == fake.resolve()


@pytest.mark.parametrize("text, value", [
    ("[relu, cosine]", ["relu", "cosine"]),           # as `softmax-icl list` prints it
    ('["relu", "cosine"]', ["relu", "cosine"]),
    ("['relu', cosine]", ["relu", "cosine"]),
    ("[1, 4, 16]", [1, 4, 16]),
    ("[0.5,2]", [0.5, 2]),
    ("[]", []),
    ("0.5", 0.5), ("true", True), ("cosine", "cosine"), ("[a, [b]]", "[a, [b]]"),
])
def test_parse_value_reads_lists_as_list_prints_them(text, value):
    assert cli.parse_value(text) == value


def test_a_list_written_as_list_prints_it_is_accepted(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr("softmax_icl.book.runner.execute_notebook",
                        lambda source, dest, parameters, **k: seen.update(parameters))
    monkeypatch.setenv("COLUMNS", "100")        # wide enough that the list shows the values whole (xdist sets 80)
    assert any(line.startswith("classes") and "[relu, cosine]" in line for line in _list_lines("norm_scaling"))
    assert cli_main(["run", "norm_scaling", "--profile", "smoke", "-p", "classes", "[cosine, relu]",
                     "--output", str(tmp_path / "out")]) == 0
    assert seen["classes"] == ["cosine", "relu"]


def _list_lines(figure):
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        cli_main(["list", figure])
    return [line.strip() for line in buf.getvalue().splitlines()]


# -- a folder of its own per run -----------------------------------------------------------------------------------

def _checkout(path: Path) -> Path:
    """A checkout with the book's record of FIGURE and a stand-in notebook."""
    (path / "notebooks").mkdir(parents=True)
    (path / "_config.yml").write_text("title: test\n")
    (path / "book" / "results").mkdir(parents=True)
    shutil.copy(ROOT / "book" / "results" / f"{FIGURE}.json", path / "book" / "results")
    (path / "notebooks" / f"{FIGURE}.ipynb").write_text("{}")
    return path


def _fake_execute(flip: str | None = None):
    """Stands in for the notebook: writes the book's record with the run's parameters (and ``flip``'s verdict
    turned) to the run's folder, and the notebook itself."""
    def execute(source, destination, parameters, env=None, **kw):
        out = Path(env["SOFTMAX_ICL_OUTPUT_DIR"])
        rec = json.loads((ROOT / "book" / "results" / f"{FIGURE}.json").read_text())
        given = {k: v for k, v in parameters.items() if k not in ("profile", "device", "use_cache")}
        rec["profile"] = parameters["profile"]
        rec["parameters"] = FIGURES.resolve(FIGURE, parameters["profile"], given)
        for c in rec["claims"]:
            if c["id"] == flip:
                c["status"], c["passed"] = "fail", False
        (out / "results").mkdir(parents=True, exist_ok=True)
        (out / "results" / f"{FIGURE}.json").write_text(json.dumps(rec))
        Path(destination).write_text("{}")
        return Path(destination)
    return execute


def test_runs_never_replace_each_other_silently(capsys, monkeypatch, tmp_path):
    root = _checkout(tmp_path / "book-checkout")
    monkeypatch.setattr("softmax_icl.book.runner.execute_notebook", _fake_execute())
    argv = ["run", FIGURE, "--profile", "smoke", "-p", "sigma", "0.5", "-p", "n_values", "[8, 16]",
            "-p", "n_window", "16", "--book", str(root)]
    name = "window_adaptation-smoke-sigma=0.5-n_values=8,16-n_window=16"
    for folder in (name, f"{name}-2", f"{name}-3"):
        assert cli_main(argv) == 0
        assert (root / "runs" / folder / "results" / f"{FIGURE}.json").is_file()
        assert f"Run folder: {root / 'runs' / folder}" in capsys.readouterr().out
    assert cli_main(argv + ["--replace"]) == 0                  # replacing one is asked for
    assert f"Run folder: {root / 'runs' / name}\n" in capsys.readouterr().out
    assert sorted(p.name for p in (root / "runs").iterdir()) == [name, f"{name}-2", f"{name}-3"]
    assert cli_main(["run", FIGURE, "--book", str(root)]) == 0
    assert (root / "runs" / "window_adaptation-default" / "results").is_dir()
    assert cli_main(["run", FIGURE, "--seed-offset", "500", "--book", str(root)]) == 0
    assert (root / "runs" / "window_adaptation-default-seed-offset=500").is_dir()


def test_a_run_folder_name_is_short_and_safe():
    fig = FIGURES["norm_scaling"]
    assert cli.run_name(fig, "paper", {}) == "norm_scaling-paper"
    assert cli.run_name(fig, "default", {"classes": ["relu", "cosine"], "sigma": 0.5}) == \
        "norm_scaling-default-classes=relu,cosine-sigma=0.5"
    long = cli.run_name(fig, "default", {"L_values": [0.1 * k for k in range(1, 60)]})
    assert len(long) <= len("norm_scaling-default-") + cli.SLUG_CHARS and "/" not in long
    assert long != cli.run_name(fig, "default", {"L_values": [0.1 * k for k in range(1, 61)]})


def test_a_run_reports_its_verdicts_and_what_differs_from_the_book(capsys, monkeypatch, tmp_path):
    root = _checkout(tmp_path / "book-checkout")
    monkeypatch.setattr("softmax_icl.book.runner.execute_notebook", _fake_execute(flip="softmax-near-oracle"))
    assert cli_main(["run", FIGURE, "--profile", "smoke", "-p", "sigma", "0.5", "--book", str(root)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines if str(root) not in line) <= 100      # a path is as long as it is
    book = json.loads((ROOT / "book" / "results" / f"{FIGURE}.json").read_text())
    for c in book["claims"]:
        assert any(line.split()[:1] == [c["id"]] for line in lines), f"no row for {c['id']}"
    row = next(line for line in lines if line.split()[:1] == ["softmax-near-oracle"])
    assert row.split()[1:3] == ["claim", "FAIL"] and row.rstrip().endswith("PASS")     # the book's verdict beside it
    text = " ".join(out.split())                          # the notes are wrapped to the terminal
    assert "sigma 0.5 (book 0.1, -p)" in text and "steps 400 (book 1000)" in text
    assert "Verdicts that differ from the book's (1 of 14): softmax-near-oracle PASS -> FAIL" in text
    assert "Smoke profile:" in text and "its verdicts are not the book's" in text
    assert f"softmax-icl compare book {root / 'runs'}" in out


def test_a_runs_parameters_are_resolved_once(monkeypatch, tmp_path):
    """One resolution of a run's parameters in the command (before any compute) and one in the notebook's Run; the
    book's settings for the report come from the book's record, and whether a run is custom from its overrides."""
    from softmax_icl.book import registry, run as run_module
    from softmax_icl.book.run import Run

    calls = []

    def counting(resolve):
        def wrapped(*a, **k):
            calls.append(a[1:3])
            return resolve(*a, **k)
        return wrapped

    for where in (cli, run_module, __import__("softmax_icl.book.terminal", fromlist=["resolve"])):
        monkeypatch.setattr(where, "resolve", counting(registry.resolve))
    root = _checkout(tmp_path / "book-checkout")
    monkeypatch.setattr("softmax_icl.book.runner.execute_notebook", _fake_execute())
    assert cli_main(["run", FIGURE, "--profile", "smoke", "-p", "sigma", "0.5", "--book", str(root)]) == 0
    assert calls == [("smoke", {"sigma": 0.5})]
    calls.clear()
    run = Run(FIGURES[FIGURE], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path / "r"),
              overrides={"sigma": 0.5, "seeds": None, "steps": FIGURES[FIGURE].params["steps"].value("smoke")})
    assert len(calls) == 1 and run.custom == {"sigma": 0.5}          # a value equal to the profile's is not custom
    assert not Run(FIGURES[FIGURE], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path / "s")).custom


def test_a_run_at_the_books_settings_says_its_verdicts_are_the_books():
    book = json.loads((ROOT / "book" / "results" / f"{FIGURE}.json").read_text())
    text = run_report(book, book)
    assert "Every verdict is the book's" in text and "Parameters" not in text and "Smoke" not in text


# -- figures are written aside and moved in with the record ---------------------------------------------------------

def test_figures_wait_for_the_record(tmp_path, monkeypatch):
    """A run stopped after drawing some figures leaves nothing beside the earlier run's record; finish() puts its
    figures and record in place together."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from softmax_icl.book.run import Run, discard_pending_figures

    out = tmp_path / "run"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / f"{FIGURE}_a.png").write_bytes(b"earlier")
    (out / "results").mkdir()
    (out / "results" / f"{FIGURE}.json").write_text("earlier")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    run = Run(FIGURES[FIGURE], "smoke", "cpu", use_cache=False, output_dir=str(out))
    for name in ("a", "b"):
        fig, ax = plt.subplots()
        ax.plot([0, 1])
        run.savefig(fig, name)
    visible = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()
               and not any(part.startswith(".") for part in p.relative_to(out).parts)}
    assert visible == before                               # stopped here: nothing of this run is in view
    discard_pending_figures(out, alive_only=False)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    run2 = Run(FIGURES[FIGURE], "smoke", "cpu", use_cache=False, output_dir=str(out))
    fig, ax = plt.subplots()
    run2.savefig(fig, "a")
    run2.finish()
    assert (out / "figures" / f"{FIGURE}_a.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "figures" / f"{FIGURE}_a.pdf").is_file() and not list(out.glob(".pending-figures-*"))
    assert json.loads((out / "results" / f"{FIGURE}.json").read_text())["notebook"] == FIGURE


def test_an_interrupted_figure_save_leaves_no_partial_file(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from softmax_icl import plotting

    plotting.save(plt.subplots()[0], tmp_path, "fig", show=False)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    calls = []
    real = matplotlib.figure.Figure.savefig

    def savefig(self, fname, **kw):
        calls.append(fname)
        if len(calls) == 2:                         # the PNG is drawn, then Ctrl-C during the PDF
            raise KeyboardInterrupt
        return real(self, fname, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    fig, ax = plt.subplots()
    ax.plot([0, 1, 0])
    with pytest.raises(KeyboardInterrupt):
        plotting.save(fig, tmp_path, "fig", show=False)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before     # neither file replaced, no temporary


# -- Ctrl-C and SIGTERM: one line, 130 and 143, nothing of the run beside the earlier one ----------------------------

def _sleeping_checkout(path: Path, started: Path) -> Path:
    """A checkout whose FIGURE notebook draws two figures through a Run, then waits to be stopped."""
    root = _checkout(path)
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = new_code_cell('profile = "default"\ndevice = "auto"\nuse_cache = True')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, new_code_cell(
        "import pathlib, time\nimport matplotlib.pyplot as plt\nfrom softmax_icl.book.run import Run\n"
        "from softmax_icl.figures import window_adaptation\n"
        "run = Run(window_adaptation.FIGURE, profile, 'cpu', use_cache=False)\n"
        "for name in ('a', 'b'):\n    fig, ax = plt.subplots()\n    ax.plot([0, 1])\n    run.savefig(fig, name)\n"
        f"pathlib.Path({str(started)!r}).touch()\ntime.sleep(300)")]
    nbformat.write(nb, root / "notebooks" / f"{FIGURE}.ipynb")
    return root


@pytest.mark.skipif(os.name != "posix", reason="signals to a child process: POSIX")
@pytest.mark.parametrize("sig, status, word", [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_stopped_run_ends_with_one_line_and_leaves_the_earlier_run_as_it_was(sig, status, word, tmp_path):
    started = tmp_path / "started"
    root = _sleeping_checkout(tmp_path / "checkout", started)
    out = tmp_path / "earlier"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / f"{FIGURE}_a.png").write_bytes(b"earlier figure")
    (out / "results").mkdir()
    (out / "results" / f"{FIGURE}.json").write_text('{"earlier": true}')
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    proc = subprocess.Popen([sys.executable, "-m", "softmax_icl", "run", FIGURE, "--profile", "smoke", "--book",
                             str(root), "--output", str(out), "--replace"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert started.exists(), f"the notebook never got to its figures: {proc.communicate()}"
    os.killpg(proc.pid, sig)                     # as a terminal sends Ctrl-C: to the whole process group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status
    assert err.strip().splitlines() == [f"softmax-icl: stopped by {word}; nothing of this run was put in place (the "
                                        "stages it finished are cached: the same command resumes)"]
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert {k: v for k, v in after.items() if k.name != f"{FIGURE}.failed.ipynb"} == before
