"""Generated pages (results appendix, parameter values, landing tables) match the code and the records."""

from pathlib import Path

from softmax_icl.book.pages import page_texts, settings_markdown
from softmax_icl.figures import FIGURES, main as cli_main

ROOT = Path(__file__).resolve().parents[1]


def test_committed_settings_page_matches_the_registry():
    assert (ROOT / "book" / "settings.md").read_text() == settings_markdown(FIGURES), \
        "book/settings.md is stale: run `softmax-icl pages`"


def test_every_generated_page_is_committed_as_generated():
    stale = [p.name for p, text in page_texts(ROOT / "book", FIGURES).items()
             if not p.is_file() or p.read_text() != text]
    assert not stale, f"stale generated page(s) {stale}: run `softmax-icl pages`"


def test_settings_page_lists_every_parameter_of_every_figure():
    text = settings_markdown(FIGURES)
    for fig in FIGURES.values():
        assert fig.title in text
        for name in fig.params:
            assert f"`{name}`" in text


def test_settings_page_folds_our_choices_and_keeps_what_the_papers_fix_in_view():
    """What the papers fix stays in view; our choices fold under their group: those the same at every profile in one
    block, those that change with the profile in another."""
    import re

    from softmax_icl.book.settings_page import FOLDED_WHEN_SAME
    from softmax_icl.profiles import PROFILES, fmt

    text = settings_markdown(FIGURES)
    folded = {m for block in re.findall(r":::\{dropdown\} \d+ (?:more|parameters?), the same at every profile\n(.*?)\n:::",
                                          text, flags=re.S) for m in re.findall(r"^\* - `(\w+)`", block, flags=re.M)}
    expected = {n for fig in FIGURES.values() for n, p in fig.params.items()
                if p.source in FOLDED_WHEN_SAME and len({fmt(p.value(pr)) for pr in PROFILES}) == 1}
    assert folded == expected and folded
    varying = {m for block in re.findall(r":::\{dropdown\} \d+ parameters? changes? with the profile\n(.*?)\n:::",
                                           text, flags=re.S) for m in re.findall(r"^\* - `(\w+)`", block, flags=re.M)}
    ours = {n for fig in FIGURES.values() for n, p in fig.params.items()
            if p.source in FOLDED_WHEN_SAME and len({fmt(p.value(pr)) for pr in PROFILES}) > 1}
    assert varying == ours and varying
    in_view = re.sub(r":::\{dropdown\}.*?\n:::", "", text, flags=re.S)
    papers = {n for fig in FIGURES.values() for n, p in fig.params.items() if p.source == "paper"}
    assert papers and all(f"`{n}`" in in_view for n in papers)


def test_every_notebook_is_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text()
    for fig in FIGURES.values():
        assert f"notebooks/{fig.name}" in toc


# -- counting: claims reproduced / not reproduced / inconclusive; findings and controls apart ------------------------

import json  # noqa: E402
import re  # noqa: E402

from softmax_icl.book import audit  # noqa: E402


def _claim(id, passed, kind="claim", **extra):
    return {"id": id, "statement": f"statement of {id}", "passed": passed, "value": 1.0, "threshold": "> 0",
            "kind": kind, "source": "Collins et al. Fig. 1", **extra}


def _write(results, figure, claims):
    rec = {"notebook": figure, "profile": "default", "claims": claims, "key_numbers": {},
           "provenance": {"device": "cpu", "git_revision": "abc"}, "timings": {"total": 1.0}}
    (results / f"{figure}.json").write_text(json.dumps(rec))
    return rec


LEDGER = """
papers:
  p1: {cite: c, short: P1 (2024), title: t}
claims:
  - id: one
    paper: p1
    source: {file: f.md, section: s}
    quote: q
    claim: the first claim
    figure: {paper: Fig. 1, chapter: window_adaptation}
    scope: s
    baselines: [b]
  - id: two
    paper: p1
    source: {file: f.md, section: s}
    quote: q
    claim: the second claim
    figure: {paper: Fig. 2, chapter: window_adaptation}
    scope: s
    baselines: [b]
  - id: three
    paper: p1
    source: {file: f.md, section: s}
    quote: q
    claim: the third claim
    figure: {paper: Fig. 3, chapter: window_adaptation}
    scope: s
    baselines: [b]
  - id: four
    paper: p1
    source: {file: f.md, section: s}
    quote: q
    claim: the title
    figure: {paper: title, chapter: low_rank}
    scope: s
    setting: the data model
    baselines: [b]
"""

#: The planted ledger's checks, as the design names them (a check names its entry; the ledger names no check).
DESIGN = """
checks:
  window_adaptation/ok: {claim: one}
  window_adaptation/fails: {claim: two}
  low_rank/ok2: {claim: two}
  window_adaptation/flips: {claim: three}
  low_rank/r1: {claim: four, reading: first}
  low_rank/r2: {claim: four, reading: second}
"""


def _planted_ledger(tmp_path):
    from softmax_icl.book import ledger as lg
    (tmp_path / "claims.yml").write_text(LEDGER)
    (tmp_path / "design.yml").write_text(DESIGN)
    return lg.load(tmp_path / "claims.yml", tmp_path / "design.yml")



def test_entries_are_counted_in_five_categories_at_both_scales(tmp_path):
    """The headline counts ledger entries (not checks): a robust failure makes an entry not reproduced, a verdict
    that flips between seed sets inconclusive, readings that disagree 'depends'; the paper scale counts only records
    of the same code."""
    from softmax_icl.book import ledger as lg
    from softmax_icl.book.pages import headline, landing_table, reason
    from softmax_icl.book.verdicts import BookVerdicts

    led = _planted_ledger(tmp_path)
    results = tmp_path / "results"
    (results / "audit").mkdir(parents=True)
    (results / "paper").mkdir()
    rec = _write(results, "window_adaptation", [
        _claim("ok", True), _claim("fails", False), _claim("flips", True),
        _claim("ok-base", False, kind="control", control_of="ok")])
    _write(results, "low_rank", [_claim("ok2", True), _claim("r1", True), _claim("r2", False)])
    fresh = []
    for k in (1, 2, 3):
        claims = [dict(c) for c in rec["claims"]]
        claims[2]["passed"] = k != 2
        fresh.append((k, {}, {"claims": claims, "provenance": {}}))
    (results / "audit" / "window_adaptation.json").write_text(
        json.dumps(audit.build_record("window_adaptation", rec, fresh)))
    for fig, fp in (("window_adaptation", "same"), ("low_rank", "other")):
        r = json.loads((results / f"{fig}.json").read_text())
        r["provenance"]["code_fingerprint"] = "same"
        (results / f"{fig}.json").write_text(json.dumps(r))
        r["profile"], r["provenance"]["code_fingerprint"] = "paper", fp
        r["claims"] = [c if c.get("kind") == "control" else dict(c, passed=True) for c in r["claims"]]
        (results / "paper" / f"{fig}.json").write_text(json.dumps(r))
    book = BookVerdicts.read(results, {f: FIGURES[f] for f in ("window_adaptation", "low_rank")}, led)
    status = {ev.entry.id: ev.default.status for ev in book.entries}
    assert status == {"one": lg.REPRODUCED, "two": lg.NOT_REPRODUCED, "three": lg.INCONCLUSIVE, "four": lg.DEPENDS}
    assert book.counts("default") == {lg.REPRODUCED: 1, lg.NOT_REPRODUCED: 1, lg.INCONCLUSIVE: 1, lg.DEPENDS: 1,
                                      lg.NOT_SETTLED: 0, "missing": 0}
    # the low-rank paper record is of other code: not compared, so entries two and four have no paper verdict
    assert book.figures["low_rank"].paper is None and "other code" in book.figures["low_rank"].paper_note
    assert book.counts("paper") == {lg.REPRODUCED: 2, lg.NOT_REPRODUCED: 0, lg.INCONCLUSIVE: 0, lg.DEPENDS: 0,
                                    lg.NOT_SETTLED: 0, "missing": 2}
    text = "\n".join(headline(book))
    assert "1 reproduced, 1 not reproduced, 1 inconclusive, 1 depends on a setting the sources leave open, 0 not settled at this training length" in text
    assert "2 reproduced, 0 not reproduced" in text and "2 without a record" in text
    assert "The paper runs of 1 of 2 chapters were computed by earlier code" in text     # says why, not just "none"
    table = landing_table(book)
    assert table.count("\n* - ") == 4 + 1 and ":class: claims-ledger" in table
    two = next(ev for ev in book.entries if ev.entry.id == "two")
    assert reason(book, two) == "fails: 1, required > 0"
    four = next(ev for ev in book.entries if ev.entry.id == "four")
    assert reason(book, four) == "reproduced: first; not reproduced: second. r2: 1, required > 0"
    three = next(ev for ev in book.entries if ev.entry.id == "three")
    assert reason(book, three) == "flips: 1, required > 0 (clears 0 by 1; 2 of 3 seed sets agree)"


def test_every_claim_check_of_the_book_names_a_ledger_entry_that_lists_it():
    """The committed records: each check of kind claim names its ledger entry, which lists it; every entry of the
    ledger has a record of each of its checks and a baseline (a control of one of its checks); an entry one of whose
    baselines does not fail is not counted as reproduced (the design's rule: the check does not discriminate)."""
    from softmax_icl.book import ledger as lg
    from softmax_icl.book.verdicts import BookVerdicts, control_failed

    led = lg.load()
    book = BookVerdicts.read(ROOT / "book" / "results", FIGURES)
    status = {ev.entry.id: ev.default.status for ev in book.entries if ev.default is not None}
    records = {p.stem: json.loads(p.read_text()) for p in (ROOT / "book" / "results").glob("*.json")}
    for fig, rec in records.items():
        for c in rec["claims"]:
            if c.get("kind") == "claim":
                assert c.get("ledger"), f"{fig}/{c['id']} names no ledger entry"
                assert f"{fig}/{c['id']}" in led.by_id(c["ledger"]).all_checks(), f"{fig}/{c['id']}"
    for e in led.entries:
        controls = []
        for key in e.all_checks():
            fig, cid = key.split("/", 1)
            ids = {c["id"]: c for c in records[fig]["claims"]}
            assert cid in ids, f"ledger entry {e.id} names {key}, which the committed record lacks"
            controls += [c for c in records[fig]["claims"] if c.get("control_of") == cid]
        assert controls, f"{e.id}: no baseline"
        if not all(control_failed(c) for c in controls):
            assert status[e.id] != lg.REPRODUCED, f"{e.id}: a baseline passes, yet the entry counts as reproduced"


def test_audit_offsets_every_seed_parameter_and_nothing_else():
    from softmax_icl.profiles import BOOK_POOL

    for fig in FIGURES.values():
        over = audit.seed_overrides(fig, "default", BOOK_POOL + 2 * audit.SEED_OFFSET)
        assert set(over) == {n for n in fig.params if n.endswith("_seed")} and "seeds" not in over
        assert all(v == fig.params[n].value("default") + 2 * audit.SEED_OFFSET for n, v in over.items())


def test_a_set_that_did_not_run_is_not_counted_and_one_without_the_check_disagrees(tmp_path):
    rec = {"claims": [_claim("a", True)], "profile": "default", "provenance": {}}
    record = audit.build_record("x", rec, [(0, {}, {"claims": [_claim("a", True)]}), (11000, {}, None),
                                           (12000, {}, {"claims": [_claim("a", True)]})])
    assert record["checks"][0]["stable"] is True
    st = audit.stability("a", record, True)
    assert st.stable and st.text() == "2 of 2 seed sets agree (value 1 in every set; 1 did not run)"
    assert audit.status(_claim("a", True), record) == "reproduced"
    record = audit.build_record("x", rec, [(0, {}, {"claims": [_claim("a", True)]}), (11000, {}, {"claims": []})])
    st = audit.stability("a", record, True)
    assert not st.stable and (st.agree, st.ran) == (1, 2)
    assert audit.status(_claim("a", True), record) == "inconclusive"


def test_audit_command_writes_records_from_the_fresh_runs_and_regenerates_the_summary(tmp_path, monkeypatch, capsys):
    """`softmax-icl audit --no-run` on a checkout whose runs exist (what the executors leave behind): five sets in
    all, the earlier pool and four fresh ones, each in the folder of its offset."""

    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "notebooks").mkdir()
    results = tmp_path / "book" / "results"
    results.mkdir(parents=True)
    rec = _write(results, "low_rank", [_claim("a", True), _claim("b", False)])
    offsets = audit.set_offsets(5)
    for off in offsets:
        out = audit.run_folder(tmp_path, "default", "low_rank", off) / "results"
        out.mkdir(parents=True)
        fresh = json.loads(json.dumps(rec))
        fresh["claims"][1]["passed"] = off == offsets[1]
        (out / "low_rank.json").write_text(json.dumps(fresh))
    monkeypatch.chdir(tmp_path)
    assert cli_main(["audit", "--figures", "low_rank", "--no-run"]) == 0
    out = capsys.readouterr().out
    assert "low_rank: 1/2 checks keep their status in every seed set; not stable: b" in out
    assert "b                                            FAIL | FAIL PASS FAIL FAIL FAIL" in out
    record = json.loads((results / "audit" / "low_rank.json").read_text())
    assert [[s["status"] for s in c["sets"]] for c in record["checks"]] == [["pass"] * 5,
                                                                           ["fail", "pass", "fail", "fail", "fail"]]
    assert [s["offset"] for s in record["sets"]] == offsets and record["sets"][0]["name"] == "the earlier pool"
    assert record["sets"][1]["seeds"] == audit.seed_overrides(FIGURES["low_rank"], "default", offsets[1])
    summary = (tmp_path / "book" / "scales.md").read_text()
    assert "# Results at both scales" in summary and "Every check of" in summary


def test_an_audit_speaks_for_a_rerun_that_reproduces_the_audited_run_and_not_for_another(tmp_path):
    """A re-execution after a code move (new revision, the same verdicts and values within tolerance) keeps its
    audit; a changed verdict or a value outside the tolerance drops it; an old audit record without the audited
    checks falls back to the revision."""
    rec = {"notebook": "low_rank", "profile": "default", "claims": [_claim("a", True), _claim("b", False)],
           "key_numbers": {}, "provenance": {"git_revision": "old"}}
    record = audit.build_record("low_rank", rec, [(k, {}, rec) for k in audit.set_offsets(3)])
    assert [c["id"] for c in record["committed_claims"]] == ["a", "b"]
    same = [dict(c, value=1.0 + 1e-9) for c in rec["claims"]]
    assert audit.speaks_for(record, "low_rank", same, "new")
    assert not audit.speaks_for(record, "low_rank", [dict(same[0], passed=False), same[1]], "new")
    assert not audit.speaks_for(record, "low_rank", [dict(same[0], value=2.0), same[1]], "new")
    assert not audit.speaks_for(record, "low_rank", same[:1], "new")
    legacy = {k: v for k, v in record.items() if k != "committed_claims"}
    assert audit.speaks_for(legacy, "low_rank", same, "old") and not audit.speaks_for(legacy, "low_rank", same, "new")
    assert not audit.speaks_for(None, "low_rank", same, "old")


def test_verdict_box_groups_checks_by_claim_with_baselines_fresh_seeds_and_paper_scale():
    from softmax_icl.book.chapter import verdict_markdown

    claims = [_claim("softmax-near-oracle", True, ledger="nn-window", title="near the tuned window"),
              _claim("softmax-near-oracle-control", False, kind="control", control_of="softmax-near-oracle",
                     title="the linear unit"),
              _claim("softmax-beats-linear", True, ledger="linear-cannot-adapt"),
              _claim("softmax-beats-linear-every-n", False, kind="finding")]
    rec = {"notebook": "window_adaptation", "profile": "default", "claims": claims, "provenance": {}}
    flipped = [dict(c, passed=(c["id"] != "softmax-beats-linear") and c["passed"]) for c in claims]
    record = audit.build_record("window_adaptation", rec, [(1, {}, rec), (2, {}, {"claims": flipped}), (3, {}, rec)])
    paper = {"claims": [dict(c, value=2.0) for c in claims]}
    box = verdict_markdown(claims, audit=record, paper=paper, figure="window_adaptation")
    assert "1 reproduced, 1 inconclusive" in box and "verdict-mixed" in box
    assert "↳ near the tuned window" in box and "↳ baseline: the linear unit" in box
    assert "fails, as it must" in box and "3 of 3 agree" in box and "2 of 3 agree: inconclusive" in box
    assert "passes (2)" in box                          # the paper-scale column
    assert "Findings of ours (0 of 1 hold)" in box
    assert "We show that an attention unit learns a window" in box           # the quote, folded
    plain = verdict_markdown(claims[:2], figure="window_adaptation")
    assert "not audited" in plain and "no record" in plain and "verdict-reproduced" in plain


def test_audit_summary_says_per_check_how_many_sets_agree_and_names_the_sets_of_one_that_flips(tmp_path, monkeypatch):
    from softmax_icl.book import chapter
    from softmax_icl.book.records import Claim

    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "book" / "results" / "audit").mkdir(parents=True)
    claims = [_claim("steady", True), _claim("flips", False, kind="finding")]
    rec = {"notebook": "low_rank", "profile": "default", "claims": claims, "provenance": {}}
    flipped = [claims[0], dict(claims[1], passed=True, value=0.5)]
    earlier, one, two = audit.set_offsets(3)
    record = audit.build_record("low_rank", rec, [(earlier, {}, rec), (one, {}, {"claims": flipped}), (two, {}, None)])
    (tmp_path / "book" / "results" / "audit" / "low_rank.json").write_text(json.dumps(record))
    monkeypatch.chdir(tmp_path)

    class FakeRun:
        figure, profile, revision = "low_rank", "default", "r"
        definition = FIGURES["low_rank"]
        cfg = FIGURES.resolve("low_rank", "default")
        custom: dict = {}                                           # the parameters set away from the profile's
    run = FakeRun()
    run.claims = [Claim(**c) for c in claims]
    text = chapter.audit_summary(run)
    assert "rerun with 3 seed sets, the earlier pool (offset 0: " in text
    assert "2 fresh sets (offsets 11000, 12000)" in text
    assert "1 of 2 checks have their status here in every set that ran" in text   # a set that did not run: not counted
    assert "steady [claim]: pass here; 2 of 2 seed sets agree (value 1 in every set; 1 did not run)" in text
    assert ("flips [finding]: fail here; 1 of 2 seed sets agree (values 0.5 to 1; 1 did not run); by set: the earlier "
            "pool fail (1), fresh set 1 pass (0.5), fresh set 2 did not run") in text
    run.cfg, run.custom = dict(run.cfg, seeds=7), {"seeds": 7}      # not the book's settings: no audit applies
    assert chapter.audit_summary(run).startswith("No seed audit applies to this run")


def test_a_verdict_that_changes_with_scale_names_its_checks_values_and_the_settings_that_differ(tmp_path):
    """The chapter's paragraph of a claim whose verdict differs between the scales prints, from the two records, each
    check that moved with its value at both scales and every setting in which the runs differ; a claim whose verdict
    holds at both scales gets no such text."""
    from softmax_icl.book import ledger as lg
    from softmax_icl.book.pages import scale_difference
    from softmax_icl.book.verdicts import BookVerdicts

    led = _planted_ledger(tmp_path)
    results = tmp_path / "results"
    (results / "paper").mkdir(parents=True)
    for profile, where, passed, steps in (("default", results, False, 1000), ("paper", results / "paper", True, 5000)):
        rec = {"notebook": "window_adaptation", "profile": profile, "key_numbers": {},
               "parameters": {"profile": profile, "steps": steps, "d": 5},
               "claims": [_claim("ok", True), dict(_claim("flips", passed), value=2.5 if passed else 0.5)],
               "provenance": {"device": "cpu", "git_revision": "abc", "code_fingerprint": "same"}}
        (where / "window_adaptation.json").write_text(json.dumps(rec))
    book = BookVerdicts.read(results, {f: FIGURES[f] for f in ("window_adaptation", "low_rank")}, led)
    one, three = (next(ev for ev in book.entries if ev.entry.id == i) for i in ("one", "three"))
    assert scale_difference(book, one) == ""
    text = scale_difference(book, three)
    assert "0.5 (fails) at the default scale, 2.5 (passes) at the paper scale, required > 0" in text
    assert "`steps` 1000 → 5000;" in text or text.count("`steps` 1000 → 5000") == 1
    assert "{doc}`/book/settings`" in text
    assert "`d`" not in text and "`profile`" not in text


# -- the landing page and the verdict colours ---------------------------------------------------------------------

def test_every_verdict_has_one_colour_whose_text_reads_at_4_5_to_1():
    """One palette for every verdict (the ledger's categories, "not settled at this training length" and no record):
    a distinct fill and badge role each, text on the fill at a WCAG contrast of at least 4.5:1, and the stylesheet's
    verdict block as the palette writes it."""
    from softmax_icl.book import ledger as lg
    from softmax_icl.book import palette
    from softmax_icl.book.pages import BADGE, SHORT

    assert set(lg.CATEGORIES) | {palette.NOT_SETTLED, None} <= set(palette.PALETTE)
    assert set(palette.VERDICTS) == set(palette.PALETTE) == set(BADGE) == set(SHORT)
    fills = [c.fill.lower() for c in palette.PALETTE.values()]
    roles = [c.role for c in palette.PALETTE.values()]
    assert len(set(fills)) == len(fills) and len(set(roles)) == len(roles)
    for status, c in palette.PALETTE.items():
        assert palette.contrast(c.fill, c.text) >= palette.MIN_TEXT_CONTRAST, (status, c)
    css = (ROOT / "_static" / "book.css").read_text()
    assert palette.css() in css, "_static/book.css: the verdict colours are stale: run `softmax-icl pages`"
    for c in palette.PALETTE.values():
        assert c.fill in palette.css() and c.text in palette.css()


def test_contrast_follows_the_wcag_formula():
    from softmax_icl.book.palette import contrast

    assert contrast("#ffffff", "#000000") == 21.0
    assert contrast("#777777", "#777777") == 1.0
    assert round(contrast("#ee9040", "#ffffff"), 2) == 2.41     # the theme's orange with white text fails 4.5


def test_clearance_reads_a_comparison_threshold_and_agrees_with_the_verdict():
    from softmax_icl.book.pages import clearance, decisive

    assert abs(clearance({"value": 4.1, "threshold": "> 1.5 and strictly decreasing", "passed": True}) - 2.6) < 1e-12
    assert abs(clearance({"value": 0.144, "threshold": "< 0.1", "passed": False}) + 0.044) < 1e-12
    assert clearance({"value": 0.05, "threshold": "<= 1e-1", "passed": True}) > 0
    assert clearance({"value": [1, 2], "threshold": "> 0", "passed": True}) is None
    assert clearance({"value": 1.0, "threshold": "> 0 in every seed", "passed": False}) is None  # other conditions
    assert clearance({"value": 1.0, "threshold": "at every n: an interval", "passed": True}) is None
    text = decisive({"id": "x", "title": "the ratio", "value": 0.144, "threshold": "< 0.1", "passed": False},
                    fresh=(3, 5))
    assert text == "the ratio: 0.144, required < 0.1 (misses 0.1 by 0.044; 3 of 5 seed sets agree)"


def test_every_row_of_the_landing_tables_names_its_deciding_number_and_threshold():
    """The committed records: each ledger entry with a record has a reason that prints a number and what it was
    required to be (the results appendix), the landing tables come one per paper, and the landing page's first lines
    give, per paper, at most three sentences: its badge counting the claims reproduced, what its authors claim, each
    headline result with its number and its verdict in words, and every other claim not reproduced, by name."""
    from softmax_icl.book.landing import PLAIN, answer_markdown, headline_clause
    from softmax_icl.book.pages import by_paper, landing_table, reason
    from softmax_icl.book.verdicts import BookVerdicts

    book = BookVerdicts.read(ROOT / "book" / "results", FIGURES)
    for ev in book.entries:
        if ev.default is None:
            continue
        why = reason(book, ev)
        assert "required" in why and any(ch.isdigit() for ch in why), (ev.entry.id, why)
    groups = by_paper(book)
    assert [k for k, _ in groups] == list(book.ledger.papers)
    table = landing_table(book)
    assert table.count(":class: claims-ledger") == len(groups)
    for key, _ in groups:
        assert f"{{admonition}} {book.ledger.papers[key]['short']}: its " in table
    answer = answer_markdown(book).split("```{figure}")[0]
    bullets = [ln for ln in answer.splitlines() if ln.startswith("* ")]
    assert len(bullets) == len(groups)
    for (key, evs), line in zip(groups, bullets):
        paper = book.ledger.papers[key]
        assert line.startswith(f"* **{paper['short']}** {{bdg-") and "claim that" in line
        # at most three sentences (a number's decimal point is no full stop), each headline with its verdict in words
        assert len(re.findall(r"(?<!\bal)[.!?](?:\s|$)", line)) <= 3, line
        for h in paper["headline"]:
            ev = next(x for x in evs if x.entry.id == h["entry"])
            assert headline_clause(book, h) in line and headline_clause(book, h).endswith(f"({PLAIN[ev.default.status]})")
        reproduced = sum(ev.default is not None and ev.default.status == "reproduced" for ev in evs)
        assert f"`{reproduced} of {len(evs)} claims reproduced`" in line
        others = [ev for ev in evs if ev.default is not None and ev.default.status != "reproduced"
                  and ev.entry.id not in {h["entry"] for h in paper["headline"]}]
        assert all(f"“{ev.entry.label}”" in line for ev in others), "every exception is named"


def test_overview_figure_fills_its_cells_from_the_palette_and_groups_rows_by_paper(tmp_path):
    """The overview figure, drawn from the committed records: every verdict it shows is painted in its palette fill,
    it is as wide as the column, and its rows carry each paper's name once above that paper's entries."""
    import numpy as np
    from PIL import Image

    from softmax_icl.book.palette import PALETTE
    from softmax_icl.book.pages import by_paper, overview_figure
    from softmax_icl.book.verdicts import BookVerdicts
    from softmax_icl.plotting import COLUMN_WIDTH_IN

    book = BookVerdicts.read(ROOT / "book" / "results", FIGURES)
    png = next(p for p in overview_figure(book, tmp_path / "overview") if p.suffix == ".png")
    with Image.open(png) as img:
        pixels = np.asarray(img.convert("RGB")).reshape(-1, 3)
        width_in = float(img.text["width_in"])
    colours = {tuple(int(c.fill[k:k + 2], 16) for k in (1, 3, 5)) for c in PALETTE.values()}
    shown = {v.status if v is not None else None for ev in book.entries for v in (ev.default, ev.paper)}
    for status in shown:
        fill = tuple(int(PALETTE[status].fill[k:k + 2], 16) for k in (1, 3, 5))
        assert (pixels == fill).all(axis=1).sum() > 100, f"no cell painted {PALETTE[status].fill} ({status})"
    assert len(colours) == len(PALETTE)
    assert abs(width_in - COLUMN_WIDTH_IN) < 0.3            # nothing cut off, nothing sticking out of the column
    assert [k for k, _ in by_paper(book)] == [k for k in book.ledger.papers if any(
        ev.entry.paper == k for ev in book.entries)]


def test_a_decided_check_reads_as_its_bound_against_the_threshold():
    """A log-ratio statistic reads as a factor, with the deciding cell and by how much it clears or misses."""
    import math

    from softmax_icl.book.deciding import decided_number

    def check(hi, key="window_adaptation/softmax-near-oracle", cells=2):
        cell = {"label": "L = 8, n = 128", "test": "below", "threshold": math.log(1.25), "margin": math.log(1.25),
                "mean": hi - 0.01, "lo": hi - 0.02, "hi": hi, "exact": False}
        other = dict(cell, label="L = 2, n = 16", hi=hi - 0.5, mean=hi - 0.51, lo=hi - 0.52)
        return {"decision": {"design": key, "cells": [cell, other][:cells]}}

    assert decided_number(check(math.log(1.19))) == \
        "1.19 (upper bound at L = 8, n = 128; required < 1.25; clears by 5.0%)"
    assert decided_number(check(math.log(5.0))).endswith("misses by a factor 4)")
    plain = check(0.14, key="low_rank/links-rho1-to-zero", cells=1)
    plain["decision"]["cells"][0].update(threshold=0.1, margin=0.05, label="quadratic")
    assert decided_number(plain) == "0.14 (upper bound; required < 0.1; misses by 0.04)"
    assert decided_number({"value": 1.0}) is None                  # a check of its own rule


def test_the_setting_follows_the_landing_and_the_machinery_sits_in_the_appendix():
    """The reading path: the landing page, the Setting page, the chapters, the tutorial; the results, the chapters'
    further figures, the design and the parameter values in the appendix after them; one results page (the results
    summary merged into it)."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert toc["root"] == "book/intro" and files[0] == "book/setting"
    appendix = next(p for p in toc["parts"] if p["caption"] == "Appendix")
    assert [c["file"] for c in appendix["chapters"]] == ["book/scales", "book/more_figures", "book/design",
                                                                     "book/settings"]
    assert max(files.index(f) for f in files if f.startswith("notebooks/")) < files.index("book/scales")
    assert "book/results_summary" not in files and not (ROOT / "book" / "results_summary.md").exists()
    assert (ROOT / "book" / "settings.md").read_text().startswith("# Parameter values and deviations")


def test_a_headline_number_reads_in_words():
    """``in_words``: a log ratio as a percentage more (or less) than 1 or as a factor, a fraction as a percentage,
    readings counted; the words around the number are the ledger's."""
    import math

    from softmax_icl.book.landing import in_words

    assert in_words("within {more} of it", math.log(1.19)) == "within 19\u00a0% of it"
    assert in_words("{less} lower", math.log(0.75)) == "25\u00a0% lower"
    assert in_words("at least {times} the window's", math.log(26.6)) == "at least 26.6 times the window's"
    assert in_words("on {share} of contexts", 0.972) == "on 97\u00a0% of contexts"
    assert in_words("in {held} of the {readings}\n   ways", held=1, readings=4) == "in 1 of the 4 ways"


def test_a_deciding_number_reads_in_words():
    """``deciding.in_words``: where a check's number lies and where the claim needs it, as a factor for a log-ratio
    statistic, the metric named for a check over several metrics, and none of the machinery's words (bound, margin,
    threshold, required)."""
    import math
    import re

    from softmax_icl.book.deciding import in_words

    def cell(label, test, hi, lo, thr):
        return {"label": label, "test": test, "hi": hi, "lo": lo, "mean": (hi + lo) / 2, "threshold": thr,
                "verdict": "pass"}

    near = {"decision": {"design": "window_adaptation/softmax-near-oracle",
                         "cells": [cell("a", "below", math.log(1.16), 0.0, math.log(1.25))]}}
    assert in_words(near) == "at most 1.16 times, where the claim needs below 1.25 times"
    far = {"decision": {"design": "window_adaptation/linear-does-not-adapt",
                        "cells": [cell("a", "above", 9.0, math.log(26.4), math.log(2))]}}
    assert in_words(far) == "at least 26.4 times, where the claim needs above 2 times"
    rho = {"decision": {"design": "low_rank/softmax-rho1-to-zero", "cells": [cell("a", "below", 0.0123, 0.0, 0.1)]}}
    assert in_words(rho) == "at most 0.0123, where the claim needs below 0.1"
    metrics = {"decision": {"design": "classification_kernel_gd/linear-sa-matches-gd-step",
                            "cells": [cell("logit_cosine", "above", 1.0, 0.99, 0.95),
                                      cell("loss_rel_diff", "below", 0.095, 0.0, 0.1)]}}
    assert in_words(metrics) == "the relative loss difference at most 0.095, where the claim needs below 0.1"
    exact = {"value": 4.3e-07, "threshold": "value < 1e-05 (a computation without seeds)"}
    assert in_words(exact) == "4.3e-07, where the claim needs below 1e-05"
    for text in (in_words(x) for x in (near, far, rho, metrics, exact)):
        assert not re.search(r"\b(?:bound|margin|threshold|required|seeds?)\b", text), text


def test_each_scale_panel_says_what_its_scale_is():
    """``scale_words``: a run's steps, batch, context lengths and seeds in words, from its parameters; the committed
    panels: each chapter's two, the paper one with a verdict per claim tested in the chapter."""
    from softmax_icl.book.pages import paper_answers, scale_difference, words
    from softmax_icl.book.scale_panels import panel_texts, scale_words
    from softmax_icl.book.verdicts import BookVerdicts

    assert scale_words({"steps": 5000, "batch_size": 512, "n_values": [4, 8, 512], "seeds": 10}) == \
        "5,000 training steps in batches of 512 tasks, contexts of 4 to 512 examples, 10 seeds"
    assert scale_words({"steps_main": 4000, "steps": 1000, "n_test": [4, 1024], "n_train": 128, "seeds": 15}) == \
        "4,000 training steps in the main setting (1,000 elsewhere), contexts of 4 to 1,024 examples (pretrained " \
        "at 128), 15 seeds"
    assert scale_words({"n": 20}) == "contexts of 20 examples"
    book = BookVerdicts.read(ROOT / "book" / "results", FIGURES)
    panels = panel_texts(book, ROOT / "book" / "scale_panels", words, scale_difference,
                         paper_answers(ROOT / "book", FIGURES))
    assert len(panels) == 2 * len(FIGURES)
    for path, text in panels.items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale: softmax-icl pages"
        head = text.split("````\n\n", 1)[1] if text.startswith("````{admonition} The answer") else text
        assert head.startswith("**Default scale:**" if path.stem.endswith("_default") else "**Paper scale:**")
        if path.stem.endswith("_paper") and book.figures[path.stem[:-len("_paper")]].paper is not None:
            assert "{bdg-" in text


def test_every_check_of_the_committed_records_has_a_title_in_its_figure():
    """Each check a committed record holds has a short title, in the record or in its figure's ``claims.TITLES`` (a
    control may take its check's): the book's tables name checks in words, never by their ids."""
    import importlib

    for fig in FIGURES:
        titles = importlib.import_module(f"softmax_icl.figures.{fig}.claims").TITLES
        rec = json.loads((ROOT / "book" / "results" / f"{fig}.json").read_text())
        untitled = [c["id"] for c in rec["claims"] if not c.get("title") and c["id"] not in titles
                    and c.get("kind") != "control"]
        assert not untitled, f"{fig}: checks without a title: {untitled}"


def test_the_paper_tab_shows_the_paper_runs_own_answer(tmp_path):
    """``publish.glued_answer`` reads the answer box a run glued into its executed notebook (None where it glued
    none), and the paper scale's panel shows it first, above the scale in words and the verdicts."""
    import json

    from softmax_icl.book.publish import glued_answer
    from softmax_icl.book.scale_panels import panel_markdown
    from softmax_icl.book.verdicts import BookVerdicts

    box = "````{admonition} The answer\n:class: answer-box\n\nAt the paper scale the window narrows.\n````"
    nb = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "display_data", "metadata": {"scrapbook": {"name": "answer-details"}},
         "data": {"application/papermill.record/text/markdown": "not this"}},
        {"output_type": "display_data", "metadata": {"scrapbook": {"name": "answer"}},
         "data": {"application/papermill.record/text/markdown": box}}]}]}
    (tmp_path / "run.ipynb").write_text(json.dumps(nb))
    assert glued_answer(tmp_path / "run.ipynb") == box
    (tmp_path / "none.ipynb").write_text(json.dumps({"cells": []}))
    assert glued_answer(tmp_path / "none.ipynb") is None and glued_answer(tmp_path / "missing.ipynb") is None
    book = BookVerdicts.read(ROOT / "book" / "results", FIGURES)
    text = panel_markdown(book, "window_adaptation", "paper", lambda *a, **k: "words", answer=box)
    assert text.startswith(box) and text.index("**Paper scale:**") > text.index("answer-box")
    assert "answer-box" not in panel_markdown(book, "window_adaptation", "default", lambda *a, **k: "words",
                                              answer=box)


def test_a_claim_left_undecided_by_a_passing_rival_says_so_in_words(tmp_path):
    """An entry whose claim check passes while its rival passes too is inconclusive; its line in words names the
    rival and its number, so the reader sees why a number that meets the claim's need does not reproduce it."""
    from softmax_icl.book import ledger as lg
    from softmax_icl.book.pages import words
    from softmax_icl.book.verdicts import BookVerdicts

    led = _planted_ledger(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    for rival_fails in (False, True):
        _write(results, "window_adaptation", [
            _claim("ok", True, status="pass"),
            _claim("ok-base", not rival_fails, kind="control", control_of="ok", title="the untrained units",
                   status="fail" if rival_fails else "pass")])
        book = BookVerdicts.read(results, {"window_adaptation": FIGURES["window_adaptation"]}, led)
        one = next(ev for ev in book.entries if ev.entry.id == "one")
        said = words(book, one)
        if rival_fails:
            assert one.default.status == lg.REPRODUCED and "rival" not in said
        else:
            assert one.default.status == lg.INCONCLUSIVE
            assert said.endswith("; but its rival, the untrained units, passes too (1)"), said
