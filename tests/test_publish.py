"""`softmax-icl build --profile paper --publish`: the records and the headline figures go beside the book's."""

import json

import pytest

from softmax_icl.book.publish import publish_records
from softmax_icl.profiles import ParameterError


def _run(root, name, profile, figure=True):
    run = root / "runs" / f"{name}-paper"
    (run / "results").mkdir(parents=True)
    (run / "results" / f"{name}.json").write_text(json.dumps({"figure": name, "profile": profile}))
    if figure:
        (run / "figures").mkdir()
        (run / "figures" / f"{name}_headline.png").write_bytes(b"\x89PNG headline")
        (run / "figures" / f"{name}_other.png").write_bytes(b"\x89PNG other")


def test_publish_copies_each_record_and_its_headline_figure(tmp_path):
    _run(tmp_path, "a", "paper")
    _run(tmp_path, "b", "paper", figure=False)
    out = publish_records(tmp_path, ["a", "b"], "paper")
    rel = sorted(p.relative_to(tmp_path).as_posix() for p in out)
    assert rel == ["book/figures/paper/a_headline.png", "book/figures/paper/a_other.png",
                   "book/results/paper/a.json", "book/results/paper/b.json"]
    assert (tmp_path / "book/figures/paper/a_headline.png").read_bytes() == b"\x89PNG headline"
    assert (tmp_path / "book/figures/paper/a_other.png").read_bytes() == b"\x89PNG other"    # every figure, by name
    assert json.loads((tmp_path / "book/results/paper/b.json").read_text())["profile"] == "paper"


def test_publish_refuses_a_record_of_another_profile(tmp_path):
    _run(tmp_path, "a", "default")
    with pytest.raises(ParameterError, match="not 'paper'"):
        publish_records(tmp_path, ["a"], "paper")
    assert not (tmp_path / "book").exists()


def test_publish_takes_the_figure_the_books_notebook_glues_as_its_headline(tmp_path):
    _run(tmp_path, "a", "paper")
    (tmp_path / "runs/a-paper/figures/a_scaling.png").write_bytes(b"\x89PNG scaling")
    (tmp_path / "notebooks").mkdir()
    cell = {"cell_type": "code", "source": ['run.savefig(fig, "scaling", glue="headline")\n']}
    (tmp_path / "notebooks/a.ipynb").write_text(json.dumps({"cells": [cell]}, indent=1))
    publish_records(tmp_path, ["a"], "paper")
    assert (tmp_path / "book/figures/paper/a_headline.png").read_bytes() == b"\x89PNG scaling"


def test_publish_removes_a_figure_the_run_no_longer_draws(tmp_path):
    _run(tmp_path, "a", "paper")
    stale = tmp_path / "book/figures/paper/a_gone.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"\x89PNG stale")
    (tmp_path / "book/figures/paper/b_kept.png").write_bytes(b"\x89PNG another figure's")
    publish_records(tmp_path, ["a"], "paper")
    assert not stale.exists() and (tmp_path / "book/figures/paper/b_kept.png").exists()
