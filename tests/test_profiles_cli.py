"""Parameter validation: clear errors naming the parameter and the allowed values, before any compute."""

import json
import subprocess
import sys

import nbformat
import pytest

from softmax_icl.book import cli
from softmax_icl.figures import FIGURES
from softmax_icl.figures import main as cli_main
from softmax_icl.profiles import PROFILES, ParameterError
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("figure", sorted(FIGURES))
@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_resolves(figure, profile):
    cfg = FIGURES.resolve(figure, profile)
    assert set(FIGURES[figure].params) <= set(cfg)


@pytest.mark.parametrize("overrides, match", [
    ({"L_values": [-1.0, 2.0, 8.0]}, r"'L_values' = -1.0 is out of range; allowed: positive numbers"),
    ({"function_class": "sine"}, r"'function_class' = 'sine' is not allowed; allowed values: 'affine'"),
    ({"d": 0}, r"'d' = 0 is out of range"),
    ({"sigma": -0.1}, r"'sigma' = -0.1 is out of range; allowed: a number >= 0"),
    ({"steps": 2.5}, r"'steps' must be an integer"),
    ({"n_values": "many"}, r"'n_values' must be a non-empty list"),
    ({"signa": 0.1}, r"unknown parameter\(s\) 'signa' for figure 'window_adaptation'; allowed: .*sigma"),
    ({"n_window": 7}, r"'n_window' = 7 must be one of n_values"),
])
def test_bad_values_raise_naming_parameter_and_allowed_values(overrides, match):
    with pytest.raises(ParameterError, match=match):
        FIGURES.resolve("window_adaptation", "default", overrides)


def test_unknown_profile_and_figure():
    with pytest.raises(ParameterError, match="'profile' = 'fast' is not allowed; allowed values: smoke, default, paper"):
        FIGURES.resolve("window_adaptation", "fast")
    with pytest.raises(ParameterError, match="unknown figure 'fig9'"):
        FIGURES.resolve("fig9")


def test_none_means_profile_value():
    steps = FIGURES["window_adaptation"].params["steps"]
    assert FIGURES.resolve("window_adaptation", "smoke", {"steps": None})["steps"] == steps.value("smoke")


@pytest.mark.parametrize("argv, message", [
    (["run", "window_adaptation", "-p", "L_values", "[-1, 2, 3]"], "'L_values' = -1.0 is out of range"),
    (["run", "window_adaptation", "-p", "function_class", "sine"], "allowed values: 'affine'"),
    (["run", "window_adaptation", "--profile", "fast"], "allowed values: smoke, default, paper"),
    (["run", "window_adaptation", "-p", "d", "0"], "'d' = 0 is out of range"),
    (["run", "window_adaptation", "--device", "tpu"], "'device' = 'tpu' is not allowed"),
    (["run", "nosuchfigure"], "unknown figure 'nosuchfigure'"),
])
def test_cli_rejects_bad_input_with_nonzero_exit_before_compute(argv, message, capsys, monkeypatch, tmp_path):
    def boom(*a, **k):
        raise AssertionError("a notebook was executed despite invalid input")

    monkeypatch.setattr("softmax_icl.book.runner.execute_notebook", boom)
    monkeypatch.chdir(ROOT)
    assert cli_main(argv + ["--output", str(tmp_path)] if argv[-1] != "nosuchfigure" else argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("name, value, message", [
    ("SOFTMAX_ICL_KERNEL", "c", "SOFTMAX_ICL_KERNEL='c' is not allowed; allowed values: 'auto' (default), 'torch'"),
])
def test_cli_rejects_a_bad_numerics_switch_before_compute(name, value, message, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(name, value)
    monkeypatch.setattr("softmax_icl.book.runner.execute_notebook", lambda *a, **k: pytest.fail("executed"))
    monkeypatch.chdir(ROOT)
    assert cli_main(["run", "window_adaptation", "--output", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_the_clis_switch_values_are_the_ones_the_numerics_accept(monkeypatch):
    from softmax_icl.engine import common, regression
    assert cli.SWITCHES["SOFTMAX_ICL_KERNEL"] == ("auto", "torch")
    monkeypatch.setenv(regression.ENV, "neither")
    with pytest.raises(ValueError, match="allowed values: 'auto', 'torch'"):
        common.build_library("engine", regression.SOURCE, "fused kernel")
    assert tuple(cli.SWITCHES) == (regression.ENV,)


def test_cli_entry_point_exit_code():
    """``python -m softmax_icl`` is the ``softmax-icl`` command (pyproject's console script names the same function)."""
    proc = subprocess.run([sys.executable, "-m", "softmax_icl", "run", "window_adaptation", "-p", "sigma", "-1"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "'sigma' = -1.0 is out of range" in proc.stderr
    assert 'softmax-icl = "softmax_icl.figures:main"' in (ROOT / "pyproject.toml").read_text()
    quiet = subprocess.run([sys.executable, "-c", "import softmax_icl.__main__"], cwd=ROOT, capture_output=True,
                           text=True)                  # imported as a module (the API pages do) it runs nothing
    assert quiet.returncode == 0 and quiet.stdout == quiet.stderr == ""


def test_cli_list_shows_figures_and_parameters(capsys):
    assert cli_main(["list"]) == 0
    out = capsys.readouterr().out
    for name, fig in FIGURES.items():
        assert name in out
        for p in fig.params:
            assert p in out


def test_parse_value():
    assert cli.parse_value("0.5") == 0.5 and cli.parse_value("[1, 2]") == [1, 2]
    assert cli.parse_value("true") is True and cli.parse_value("cosine") == "cosine"


@pytest.mark.parametrize("figure", sorted(FIGURES))
def test_notebook_parameters_cell_declares_every_figure_parameter(figure):
    nb = nbformat.read(ROOT / "notebooks" / FIGURES[figure].notebook, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "exactly one cell tagged 'parameters'"
    declared = {line.split("=")[0].strip() for line in cells[0].source.splitlines()
                if "=" in line and not line.lstrip().startswith("#")}
    assert declared == set(FIGURES[figure].params) | {"profile", "device", "use_cache", "output_dir"}
    # and the Run cell reads them all from the parameters cell
    assert any(f"Run.from_notebook({figure}.FIGURE, globals())" in c.source for c in nb.cells if c.cell_type == "code")


def test_committed_records_are_default_profile_and_every_check_says_what_it_is():
    """SPEC Part 4: every check names its kind (claim / finding / control) and its source; a control names the check
    it controls, which is in the same record."""
    from softmax_icl.book.records import KINDS

    for fig in FIGURES.values():
        path = ROOT / "book" / "results" / f"{fig.name}.json"
        if not path.exists():
            pytest.fail(f"missing record {path}")
        rec = json.loads(path.read_text())
        assert rec["notebook"] == fig.name and rec["profile"] == "default"
        assert rec["claims"], "a record without claims"
        ids = {c["id"] for c in rec["claims"]}
        for c in rec["claims"]:
            assert c.get("kind") in KINDS, f"{fig.name}/{c['id']}: kind {c.get('kind')!r}"
            assert c.get("source"), f"{fig.name}/{c['id']}: no source (re-execute the notebook after passing source=)"
            if c["kind"] == "control":
                assert c.get("control_of") in ids, f"{fig.name}/{c['id']}: controls an unknown check"



@pytest.mark.parametrize("columns", [80, 100, 400])
def test_cli_list_columns_never_collide_and_fit_the_terminal(columns, capsys, monkeypatch):
    """A long value never runs into the next column (it is elided instead), and every line fits the terminal."""
    monkeypatch.setenv("COLUMNS", str(columns))
    assert cli_main(["list"]) == 0
    import re

    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= columns
    for line in lines:
        name = line.strip().split("  ")[0]
        if line.startswith("    ") and not line.startswith("     ") and any(name in fig.params
                                                                           for fig in FIGURES.values()):
            fields = re.split(r"\s{2,}", line.strip())
            assert len(fields) >= len(PROFILES) + 1, f"columns ran together: {line!r}"    # the meaning may go below


def test_cli_list_loads_no_torch_or_plotting():
    """`softmax-icl list` must start fast (well under 1 s): nothing heavy is imported for it."""
    code = ("import sys; from softmax_icl.figures import main; main(['list']); "
            "print(sorted(m for m in ('torch', 'matplotlib', 'seaborn', 'numpy', 'papermill') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == "[]"


def test_cli_rejects_cuda_without_a_gpu_before_compute(capsys, monkeypatch, tmp_path):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("softmax_icl.book.runner.execute_notebook", lambda *a, **k: pytest.fail("executed"))
    monkeypatch.chdir(ROOT)
    for argv in (["run", "window_adaptation", "--device", "cuda", "--output", str(tmp_path)],
                 ["build", "--device", "cuda:1", "--skip-html"]):
        assert cli_main(argv) == 2
        assert "no CUDA device is available on this machine" in capsys.readouterr().err


def test_settings_page_names_sources_in_words_and_how_to_change_each_setting():
    from softmax_icl.book.pages import settings_markdown

    text = settings_markdown(FIGURES)
    assert "| spec |" not in text and "| chosen |" not in text
    for fig in FIGURES.values():
        assert f"softmax-icl run {fig.name} -p NAME VALUE" in text
        for name in fig.params:
            assert f"* - `{name}`" in text


def test_a_paper_run_on_the_cpu_says_how_long_it_takes_and_how_to_resume(capsys, monkeypatch):
    import torch

    assert cli.paper_on_cpu_note("paper", "cpu")
    err = capsys.readouterr().err
    assert "per figure" in err and "run the same command again" in err and "SOFTMAX_ICL_CACHE_DIR" in err
    assert not cli.paper_on_cpu_note("default", "cpu") and not cli.paper_on_cpu_note("paper", "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert not cli.paper_on_cpu_note("paper", "auto")                   # auto picks the GPU: no note
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.paper_on_cpu_note("paper", "auto")
    assert capsys.readouterr().out == ""                                # the note goes to stderr only


def test_seed_offset_moves_every_seed_of_the_figure_but_the_ones_set(capsys, monkeypatch, tmp_path):
    """``softmax-icl run FIGURE --seed-offset K``: every ``*_seed`` parameter moves by K, a ``-p`` value stays; a bad K
    is refused before any compute, and the book cannot be overwritten with other seeds."""
    from softmax_icl.figures import FIGURES
    fig = FIGURES["low_rank"]
    got = cli.seed_offset_params(fig, "default", 7, {"init_seed": 99})
    seeds = {n: p.value("default") for n, p in fig.params.items() if n.endswith("_seed")}
    assert got["init_seed"] == 99 and {n: got[n] - v for n, v in seeds.items() if n != "init_seed"} == \
        {n: 7 for n in seeds if n != "init_seed"} and len(seeds) >= 4        # data, init, eval and basis seeds
    monkeypatch.setattr("softmax_icl.book.runner.execute_notebook", lambda *a, **k: pytest.fail("executed"))
    monkeypatch.chdir(ROOT)
    assert cli_main(["run", "low_rank", "--seed-offset", "0", "--output", str(tmp_path)]) == 2
    assert "--seed-offset must be an integer >= 1" in capsys.readouterr().err
    assert cli_main(["run", "low_rank", "--seed-offset", "5", "--in-place"]) == 2
    assert "--in-place" in capsys.readouterr().err
