"""Generated pages (results summary, settings table) match what the code and the records say."""

from pathlib import Path

from softmax_icl.bookgen import page_texts, results_markdown, settings_markdown
from softmax_icl.registry import FIGURES

ROOT = Path(__file__).resolve().parents[1]


def test_committed_results_summary_is_generated_from_the_records():
    assert (ROOT / "book" / "results_summary.md").read_text() == results_markdown(ROOT / "book" / "results"), \
        "book/results_summary.md is stale: run `softmax-icl pages`"


def test_committed_settings_page_matches_the_registry():
    assert (ROOT / "book" / "settings.md").read_text() == settings_markdown(), \
        "book/settings.md is stale: run `softmax-icl pages`"


def test_every_generated_page_is_committed_as_generated():
    stale = [p.name for p, text in page_texts(ROOT / "book").items() if not p.is_file() or p.read_text() != text]
    assert not stale, f"stale generated page(s) {stale}: run `softmax-icl pages`"


def test_settings_page_lists_every_parameter_of_every_figure():
    text = settings_markdown()
    for fig in FIGURES.values():
        assert fig.title in text
        for name in fig.params:
            assert f"`{name}`" in text


def test_every_notebook_is_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text()
    for fig in FIGURES.values():
        assert f"notebooks/{fig.name}" in toc


# -- counting: claims reproduced / not reproduced / inconclusive; findings and controls apart ------------------------

import json  # noqa: E402

from softmax_icl import audit  # noqa: E402


def _claim(id, passed, kind="claim", **extra):
    return {"id": id, "statement": f"statement of {id}", "passed": passed, "value": 1.0, "threshold": "> 0",
            "kind": kind, "source": "Collins et al. Fig. 1", **extra}


def _write(results, figure, claims):
    rec = {"notebook": figure, "profile": "default", "claims": claims, "key_numbers": {},
           "provenance": {"device": "cpu", "git_revision": "abc"}, "timings": {"total": 1.0}}
    (results / f"{figure}.json").write_text(json.dumps(rec))
    return rec


def test_summary_counts_every_claim_whatever_its_verdict_and_links_the_failures(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    rec = _write(results, "window_adaptation", [
        _claim("ok", True), _claim("fails", False, anchor="sec-fails"), _claim("flips", True),
        _claim("open", False, kind="finding"), _claim("ctrl", False, kind="control", control_of="ok")])
    _write(results, "low_rank", [_claim("fails-too", False)])
    fresh = []
    for k, flips in ((1, True), (2, False), (3, True)):
        claims = [dict(c) for c in rec["claims"]]
        claims[2]["passed"] = not flips or k == 2
        fresh.append((k, audit.seed_overrides(FIGURES["window_adaptation"], "default", k),
                      {"claims": claims, "provenance": {}}))
    fresh[0][2]["claims"][2]["passed"] = False
    (results / "audit").mkdir()
    (results / "audit" / "window_adaptation.json").write_text(
        json.dumps(audit.build_record("window_adaptation", rec, fresh)))
    text = results_markdown(results)
    assert "**1 of 4 of the papers' claims reproduced, 2 not reproduced, 1 inconclusive.**" in text
    assert "{ref}`fails <sec-fails>`" in text                          # its anchor
    assert "`fails-too` ({doc}`chapter <../notebooks/low_rank>`)" in text   # no anchor: the chapter
    assert "0 hold, 1 do not, 0 inconclusive" in text and "1 of 1 *controls* fail, as they must" in text
    assert "3/3 fresh seed sets agree" in text and "1/3 fresh seed sets agree" in text
    assert "Collins et al. Fig. 1" in text and "control of `ok`" in text
    assert "Audited: 1 of 2 chapters (not yet: low_rank)" in text
    rec["provenance"]["git_revision"] = "newer"            # re-executed after its audit, the same results
    (results / "window_adaptation.json").write_text(json.dumps(rec))
    assert results_markdown(results) == text
    rec["claims"][0]["value"] = 2.0                        # ... with another result: the audit is not of this run
    (results / "window_adaptation.json").write_text(json.dumps(rec))
    text = results_markdown(results)
    assert "The audit of window_adaptation was of another committed run" in text
    assert "**2 of 4 of the papers' claims reproduced, 2 not reproduced, 0 inconclusive.**" in text


def test_audit_offsets_every_seed_parameter_and_nothing_else():
    for fig in FIGURES.values():
        over = audit.seed_overrides(fig, "default", 2)
        assert set(over) == {n for n in fig.params if n.endswith("_seed")} and "seeds" not in over
        assert all(v == fig.params[n].value("default") + 2 * audit.SEED_OFFSET for n, v in over.items())


def test_a_fresh_set_that_did_not_run_makes_no_verdict_stable(tmp_path):
    rec = {"claims": [_claim("a", True)], "profile": "default", "provenance": {}}
    record = audit.build_record("x", rec, [(1, {}, {"claims": [_claim("a", True)]}), (2, {}, None),
                                           (3, {}, {"claims": [_claim("a", True)]})])
    assert record["checks"][0]["stable"] is False
    st = audit.stability("a", record, True)
    assert not st.stable and st.text() == "2/2 fresh seed sets agree (1 did not run)"
    assert audit.status(_claim("a", True), record) == "inconclusive"


def test_audit_command_writes_records_from_the_fresh_runs_and_regenerates_the_summary(tmp_path, monkeypatch, capsys):
    """`softmax-icl audit --no-run` on a checkout whose fresh runs exist (what the executors leave behind)."""
    from softmax_icl import cli

    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "notebooks").mkdir()
    results = tmp_path / "book" / "results"
    results.mkdir(parents=True)
    rec = _write(results, "low_rank", [_claim("a", True), _claim("b", False)])
    for k in (1, 2, 3):
        out = audit.run_folder(tmp_path, "default", "low_rank", k) / "results"
        out.mkdir(parents=True)
        fresh = json.loads(json.dumps(rec))
        fresh["claims"][1]["passed"] = k == 2
        (out / "low_rank.json").write_text(json.dumps(fresh))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["audit", "--figures", "low_rank", "--no-run"]) == 0
    assert "low_rank: 1/2 checks keep their verdict in every fresh seed set; not stable: b" in capsys.readouterr().out
    record = json.loads((results / "audit" / "low_rank.json").read_text())
    assert [c["fresh"] for c in record["checks"]] == [[True, True, True], [False, True, False]]
    assert record["sets"][0]["seeds"] == audit.seed_overrides(FIGURES["low_rank"], "default", 1)
    summary = (tmp_path / "book" / "results_summary.md").read_text()
    assert "**1 of 2 of the papers' claims reproduced, 0 not reproduced, 1 inconclusive.**" in summary


def test_an_audit_speaks_for_a_rerun_that_reproduces_the_audited_run_and_not_for_another(tmp_path):
    """A re-execution after a code move (new revision, the same verdicts and values within tolerance) keeps its
    audit; a changed verdict or a value outside the tolerance drops it; an old audit record without the audited
    checks falls back to the revision."""
    rec = {"notebook": "low_rank", "profile": "default", "claims": [_claim("a", True), _claim("b", False)],
           "key_numbers": {}, "provenance": {"git_revision": "old"}}
    record = audit.build_record("low_rank", rec, [(k, {}, rec) for k in (1, 2, 3)])
    assert [c["id"] for c in record["committed_claims"]] == ["a", "b"]
    same = [dict(c, value=1.0 + 1e-9) for c in rec["claims"]]
    assert audit.speaks_for(record, "low_rank", same, "new")
    assert not audit.speaks_for(record, "low_rank", [dict(same[0], passed=False), same[1]], "new")
    assert not audit.speaks_for(record, "low_rank", [dict(same[0], value=2.0), same[1]], "new")
    assert not audit.speaks_for(record, "low_rank", same[:1], "new")
    legacy = {k: v for k, v in record.items() if k != "committed_claims"}
    assert audit.speaks_for(legacy, "low_rank", same, "old") and not audit.speaks_for(legacy, "low_rank", same, "new")
    assert not audit.speaks_for(None, "low_rank", same, "old")


def test_verdict_box_shows_each_checks_fresh_seed_sets_and_counts_the_inconclusive():
    from softmax_icl.chapter import verdict_markdown

    claims = [_claim("steady", True), _claim("flips", True), _claim("ctrl", False, kind="control")]
    rec = {"notebook": "low_rank", "profile": "default", "claims": claims, "provenance": {}}
    flipped = [dict(c, passed=(c["id"] != "flips") and c["passed"]) for c in claims]
    record = audit.build_record("low_rank", rec, [(1, {}, rec), (2, {}, {"claims": flipped}), (3, {}, rec)])
    box = verdict_markdown(claims, audit=record)
    assert "fresh seed sets |" in box and "1 inconclusive over 3 fresh seed sets" in box
    assert "| 3/3 agree |" in box and "**2/3 agree: inconclusive**" in box
    assert ":class: warning" in box                 # a claim that is inconclusive is not reproduced: orange
    plain = verdict_markdown(claims)
    assert "fresh seed sets" not in plain and ":class: tip" in plain
    steady = verdict_markdown(claims, audit=audit.build_record("low_rank", rec, [(k, {}, rec) for k in (1, 2, 3)]))
    assert "every verdict kept in 3 fresh seed sets" in steady and ":class: tip" in steady


def test_audit_summary_names_every_check_that_flips_with_its_fresh_verdicts(tmp_path, monkeypatch):
    from softmax_icl import chapter
    from softmax_icl.records import Claim
    from softmax_icl.registry import resolve

    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "book" / "results" / "audit").mkdir(parents=True)
    claims = [_claim("steady", True), _claim("flips", False, kind="finding")]
    rec = {"notebook": "low_rank", "profile": "default", "claims": claims, "provenance": {}}
    flipped = [claims[0], dict(claims[1], passed=True, value=0.5)]
    record = audit.build_record("low_rank", rec, [(1, {}, rec), (2, {}, {"claims": flipped}), (3, {}, None)])
    (tmp_path / "book" / "results" / "audit" / "low_rank.json").write_text(json.dumps(record))
    monkeypatch.chdir(tmp_path)

    class FakeRun:
        figure, profile, revision = "low_rank", "default", "r"
        cfg = resolve("low_rank", "default")
    run = FakeRun()
    run.claims = [Claim(**c) for c in claims]
    text = chapter.audit_summary(run)
    assert "3 fresh seed sets (every seed parameter offset by 1000, 2000, 3000" in text
    assert "2 of 2 checks do not keep their verdict" in text       # 'steady' did not run in set 3 either
    assert "flips [finding]: FAIL (1) here; fresh sets: FAIL (1), PASS (0.5), did not run" in text
    run.cfg = dict(run.cfg, seeds=7)                                # not the book's settings: no audit applies
    assert chapter.audit_summary(run).startswith("No seed audit applies to this run")
