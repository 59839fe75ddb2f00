"""The results appendix "Results at both scales" (softmax_icl.book.scales), on small fake records."""

from __future__ import annotations

import json

from softmax_icl.book.myst import nobreak
from softmax_icl.book.scales import DEFAULT_MISSING_REASON, compare_scales, scales_markdown


def _check(id, passed, value, kind="claim", threshold="> 1", control_of=None):
    return {"id": id, "statement": f"statement of {id}", "passed": passed, "value": value, "threshold": threshold,
            "kind": kind, "source": "test", "control_of": control_of}


def _record(profile, checks, device="cpu", total=12.0, code="f00d"):
    return {"notebook": "x.ipynb", "profile": profile, "claims": checks, "key_numbers": {},
            "provenance": {"device": device, "kernel": "torch", "git_revision": "abc1234", "code_fingerprint": code},
            "timings": {"total": total}}


def _write(path, record):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def _fake_book(tmp_path):
    res = tmp_path / "results"
    _write(res / "alpha.json", _record("default", [
        _check("stays", True, 2.0), _check("flips", False, 0.9), _check("ctl", False, 0.5, "control", control_of="stays"),
        _check("only-default", True, 3.0, "finding")]))
    _write(res / "paper" / "alpha.json", _record("paper", [
        _check("stays", True, 2.5), _check("flips", True, 1.2), _check("ctl", False, 0.4, "control", control_of="stays"),
        _check("only-paper", False, [1.0, 2.0, 3.0, 4.0, 5.0])], device="cuda:0", total=900.0))
    paper = json.loads((res / "paper" / "alpha.json").read_text())
    paper["provenance"]["peak_memory_mb"] = {"host": 1234.0, "cuda": 567.8}
    _write(res / "paper" / "alpha.json", paper)
    _write(res / "beta.json", _record("default", [_check("b1", True, 1.5)], total=40.0))
    return res


def test_compare_scales_marks_only_verdicts_that_change():
    a = _record("default", [_check("x", True, 2.0), _check("y", False, 0.5), _check("z", True, 1.0)])
    b = _record("paper", [_check("x", True, 3.0), _check("y", True, 1.5), _check("w", False, 0.0)])
    rows = {r["id"]: r for r in compare_scales(a, b)}
    assert [r["id"] for r in compare_scales(a, b)] == ["x", "y", "z", "w"]
    assert not rows["x"]["changes"] and rows["y"]["changes"]
    assert not rows["z"]["changes"] and rows["z"]["paper"] is None          # one side only: not a change
    assert not rows["w"]["changes"] and rows["w"]["default"] is None


def test_page_sets_profiles_side_by_side(tmp_path):
    res = _fake_book(tmp_path)
    page = scales_markdown(res, figures=["alpha", "beta"], titles={"alpha": "Alpha chapter", "beta": "Beta chapter"})
    assert page.startswith("# Results at both scales")
    assert "1 of 2 figures have a paper-profile record of the same code; 3 checks are compared at both scales, and " \
        "1 of them" in page
    changed = page.split("## Verdicts that change with scale")[1].split("## ")[0]
    assert ": flips" in changed and ": stays" not in changed
    assert "FAIL (0.9)" in changed and "PASS (1.2)" in changed and "  - > 1" in changed   # the threshold beside
    alpha = page.split("## Alpha chapter")[1].split("## ")[0]
    assert "* - stays (claim)\n  - PASS (2)\n  - PASS (2.5)\n  - > 1" in alpha
    assert "* - flips (claim)\n  - FAIL (0.9)\n  - **PASS (1.2)**" in alpha
    assert "FAIL (as it must)" in alpha and "not in this record" in alpha and "[1, 2, 3, 4, ...]" in alpha
    assert "device `cuda:0`" in alpha and "notebook compute 900 s" in alpha
    assert "peak memory host 1234 MB, cuda 568 MB" in alpha
    assert "trainer" not in page and "torch" not in page     # how the build ran is the benchmarks' page, not this one
    missing = page.split("## Figures with no paper-profile record")[1]
    assert "**Beta chapter** (`beta`)" in missing and nobreak(DEFAULT_MISSING_REASON) in missing and "alpha" not in missing


def test_a_check_with_a_title_is_named_by_it(tmp_path):
    res = tmp_path / "results"
    for profile, sub, passed in (("default", "", False), ("paper", "paper/", True)):
        _write(res / f"{sub}alpha.json", _record(profile, [{**_check("rho-to-zero", passed, 0.2, threshold="< 0.1"),
                                                            "title": "$\\rho_1 \\to 0$"}]))
    changed = scales_markdown(res, figures=["alpha"]).split("## Verdicts that change with scale")[1]
    assert "alpha: $\\rho_1 \\to 0$\n  - claim" in changed and "  - < 0.1" in changed and "rho to zero" not in changed


def test_records_of_other_code_are_not_compared(tmp_path):
    """The two-scale page refuses to set side by side records whose code fingerprints differ (or are unknown)."""
    res = tmp_path / "results"
    _write(res / "gamma.json", _record("default", [_check("g", True, 1.5)], code="aaaa"))
    _write(res / "paper" / "gamma.json", _record("paper", [_check("g", False, 0.5)], code="bbbb"))
    page = scales_markdown(res, figures=["gamma"])
    assert "0 of 1 figures have a paper-profile record of the same code" in page
    assert "## Records of other code, not compared" in page and "`bbbb`" in page and "`aaaa`" in page
    assert "## Verdicts that change with scale" not in page
    unknown = _record("paper", [_check("g", True, 1.5)], code=None)
    _write(res / "paper" / "gamma.json", unknown)
    assert "## Records of other code, not compared" in scales_markdown(res, figures=["gamma"])


def test_page_when_nothing_changes_and_default_figure_list(tmp_path):
    res = tmp_path / "results"
    _write(res / "gamma.json", _record("default", [_check("g", True, 1.5)]))
    _write(res / "paper" / "gamma.json", _record("paper", [_check("g", True, 1.7)]))
    page = scales_markdown(res)                     # figures found on disk; titles from the registry or the name
    assert "## gamma" in page and "Every check compared has the same verdict at both scales." in page
    assert "no paper-profile record" not in page     # no empty heading


def test_a_run_read_from_the_cache_says_so_and_gives_no_estimate(tmp_path):
    from softmax_icl.book.scales import cache_note

    res = tmp_path / "results"
    rec = _record("default", [_check("g", True, 1.5)], total=40.0)
    rec["cache_hits"] = {"train": True, "evaluate": False, "search": True}
    _write(res / "generalization.json", rec)
    assert cache_note(rec) == " (2 of 3 stages read from the result cache)"
    assert cache_note({**rec, "cache_hits": {"train": False}}) == "" and cache_note({}) == ""
    assert cache_note({**rec, "trained_in_parts": {"train": 5}}) == (
        " (2 of 3 stages read from the result cache; `train` trained in 5 parts by seed)")


def test_build_publishes_paper_records_beside_the_books_and_only_those(tmp_path, monkeypatch, capsys):
    """`softmax-icl build --profile paper --publish` copies runs/<figure>-paper/results/<figure>.json to
    book/results/paper/ and regenerates the pages; the book's own records stay; --publish at another profile is a
    usage error (exit 2) before anything runs."""
    from softmax_icl.figures import main as cli_main

    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "notebooks").mkdir()
    default = _record("default", [_check("a", True, 2.0)])
    _write(tmp_path / "book" / "results" / "low_rank.json", default)
    paper = _record("paper", [_check("a", False, 0.5)], total=600.0)
    _write(tmp_path / "runs" / "low_rank-paper" / "results" / "low_rank.json", paper)
    monkeypatch.chdir(tmp_path)
    assert cli_main(["build", "--profile", "paper", "--only", "low_rank", "--skip-run", "--publish"]) == 0
    assert json.loads((tmp_path / "book" / "results" / "paper" / "low_rank.json").read_text()) == paper
    assert json.loads((tmp_path / "book" / "results" / "low_rank.json").read_text()) == default
    scales = (tmp_path / "book" / "scales.md").read_text()
    assert scales.split("figures have a paper-profile record")[0].endswith("1 of 5 ") and "**FAIL (0.5)**" in scales
    assert "records published to book/results/paper/low_rank.json" in capsys.readouterr().out
    assert cli_main(["build", "--profile", "smoke", "--only", "low_rank", "--skip-run", "--publish"]) == 2
    assert "--publish puts 'paper'-profile records" in capsys.readouterr().err
