"""What a run says while it works: plain progress lines where the output is not a terminal, a line when an engine is
being compiled, a comparison that names the parameters that changed and lists only what differs."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from softmax_icl.book import runner
from softmax_icl.book.compare import compare_dirs, parameter_changes, report
from softmax_icl.figures import FIGURES
from softmax_icl.figures import main as cli_main

ROOT = Path(__file__).resolve().parents[1]


def test_training_progress_is_plain_lines_when_stderr_is_not_a_terminal():
    """Without a terminal (a log file) Progress writes lines, never a bar's carriage returns or escape codes."""
    code = ("import torch\nfrom softmax_icl.base import optimise\nw = torch.zeros(2, requires_grad=True)\n"
            "optimise([w], lambda: ((w - 1) ** 2).sum(), steps=7, lr=0.1, log_every=3, snapshot=lambda: {}, "
            "progress=True, desc='unit test')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr
    assert proc.stderr.splitlines() == ["unit test: 0/7", "unit test: 7/7 (0 s)"]


def test_the_runner_follows_training_in_plain_lines_and_shows_a_message_once(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(runner, "PLAIN_EVERY_S", 0.0)
    status = tmp_path / "status"
    bar = runner._TrainingBar(status, plain=True)
    for text in ("softmax-icl: compiling the fused kernel (regression.c) for this machine\t0\t0\n",) * 2 + (
            "train_softmax\t0\t400\n", "train_softmax\t200\t400\n", "train_softmax\t400\t400\n",
            "train_linear\t0\t50\n"):
        status.write_text(text)
        bar._show()
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    assert err.splitlines()[:4] == ["softmax-icl: compiling the fused kernel (regression.c) for this machine",
                                    "  train_softmax: 0/400", "  train_softmax: 200/400", err.splitlines()[3]]
    assert err.splitlines()[3].startswith("  train_softmax: 400/400 (") and err.splitlines()[4] == \
        "  train_linear: 0/50"


def test_compiling_an_engine_says_so(tmp_path, monkeypatch, capsys):
    """The first run on a machine compiles an engine (20-30 s): one line says so, in the runner's status file when
    one is set (the terminal that runs the notebook shows it), else on stderr."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    from softmax_icl.engine import common, regression

    monkeypatch.setenv("SOFTMAX_ICL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SOFTMAX_ICL_KERNEL", raising=False)
    monkeypatch.setattr(common, "FLAG_SETS", (["-O0"],))           # quick: only the message is under test
    status = tmp_path / "status"
    monkeypatch.setenv("SOFTMAX_ICL_PROGRESS_FILE", str(status))
    lib, how = common.build_library("engine", regression.SOURCE, "fused kernel", regression.SOURCES[1:])
    assert lib is not None, how
    assert status.read_text() == ("softmax-icl: compiling the fused kernel (regression.c) for this machine: once, "
                                  "up to a minute\t0\t0\n")
    monkeypatch.delenv("SOFTMAX_ICL_PROGRESS_FILE")
    monkeypatch.setenv("SOFTMAX_ICL_CACHE_DIR", str(tmp_path / "cache2"))
    common.build_library("engine", regression.SOURCE, "fused kernel", regression.SOURCES[1:])
    assert capsys.readouterr().err.startswith("softmax-icl: compiling the fused kernel")
    common.build_library("engine", regression.SOURCE, "fused kernel", regression.SOURCES[1:])
    assert capsys.readouterr().err == ""                            # built: nothing to say


def _run_folder(path: Path, figure: str, record: dict) -> Path:
    (path / "results").mkdir(parents=True)
    (path / "results" / f"{figure}.json").write_text(json.dumps(record))
    return path


def test_compare_names_the_changed_parameters_and_lists_only_the_differences(tmp_path, capsys):
    figure = "window_adaptation"
    book = json.loads((ROOT / "book" / "results" / f"{figure}.json").read_text())
    new = json.loads(json.dumps(book))
    new["parameters"]["sigma"] = 0.5
    new["claims"][0]["status"], new["claims"][0]["passed"] = "fail", False
    a, b = _run_folder(tmp_path / "a", figure, book), _run_folder(tmp_path / "b", figure, new)
    assert parameter_changes(book["parameters"], new["parameters"]) == [("sigma", 0.1, 0.5)]
    assert cli_main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "  parameters that differ: sigma 0.1 -> 0.5" in out
    assert any(line.startswith(f"  DIFF claims.{book['claims'][0]['id']}.verdict: PASS -> FAIL") for line in out)
    assert not any(line.startswith("  ok ") for line in out) and len(out) < 10
    assert cli_main(["compare", str(a), str(b), "--all"]) == 1
    assert sum(line.startswith("  ok ") for line in capsys.readouterr().out.splitlines()) > 20


def test_compare_limits_the_differences_it_lists(tmp_path):
    figure = "window_adaptation"
    book = json.loads((ROOT / "book" / "results" / f"{figure}.json").read_text())
    new = json.loads(json.dumps(book))
    for c in new["claims"]:
        c["value"] = 1e6
    a, b = _run_folder(tmp_path / "a", figure, book), _run_folder(tmp_path / "b", figure, new)
    text, ok = report(compare_dirs(a, b, FIGURES), limit=5)
    assert not ok and "more differences (--all lists every compared number)" in text and len(text.splitlines()) == 7


def test_cli_entry_point_works_from_any_folder(tmp_path):
    """Installed, the command finds the book from anywhere (here: the checkout the package was installed from)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "softmax_icl", "run", "window_adaptation", "-p", "sigma", "-1"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2 and "'sigma' = -1.0 is out of range" in proc.stderr
    assert time.perf_counter() - t < 30
