"""The claims ledger (book/claims.yml): every quote is the authors' own words, verbatim; the entries are well formed;
verdicts combine as the ledger's header says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from softmax_icl.book import ledger as lg

SHARED = lg.ROOT.parent / "shared" / "papers"


def test_every_quote_is_the_authors_verbatim():
    """Each quote (entries, their 'also' quotes, statements not counted) occurs in the part of its source file that
    holds the authors' own words (SOURCES.md): never in a machine-written summary or a review."""
    words = lg.authors_words()
    missing = [f"{eid}: {q.file}: {q.quote[:70]!r}" for eid, q in lg.load().quotes() if not lg.quote_found(q, words)]
    assert not missing, "quotes not found verbatim in the authors' words:\n" + "\n".join(missing)


def test_secondary_text_is_not_the_authors():
    """The extraction leaves out what SOURCES.md calls secondary: a machine-written TL;DR, a reviewer's sentence, the
    automated summary of paper 1 (so a quote taken from them would fail the test above)."""
    words = lg.authors_words()
    tldr = "with softmax SA leveraging a context-adaptive learning rate and meta-learned kernel shape to outperform"
    review = "The paper is very well-written and easy to read."
    for text in (tldr, review):
        q = [lg.Quote(f, "", text) for f in words]
        assert not any(lg.quote_found(x, words) for x in q), text
    assert "collins2024_overview.md" not in words
    # ...while the authors' parts are there
    assert lg.quote_found(lg.Quote("collins2024_reviews_and_rebuttal.md", "", "We indeed observe this decomposition "
                                   "empirically"), words)


def test_sources_copy_matches_the_shared_papers():
    """sources/papers/ is a copy of the project's shared/papers/ (where that folder is present)."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is not on this machine; the copy in sources/papers/ is used")
    for f in sorted(SHARED.glob("*.md")):
        assert (lg.SOURCES_DIR / f.name).read_text() == f.read_text(), f"sources/papers/{f.name} differs from {f}"


def test_entries_are_well_formed():
    led = lg.load()
    assert len({e.id for e in led.entries}) == len(led.entries)
    for e in led.entries:
        assert e.all_checks(), e.id
        assert all(c.count("/") == 1 for c in e.all_checks()), e.id
        assert e.baselines, f"{e.id} names no baseline that must fail"
        assert e.chapter, e.id
        if e.is_map:
            assert e.setting and len(e.readings) >= 2, e.id
    # one statement, one entry: the title of paper 2 is a single entry, read several ways
    titles = [e for e in led.entries if e.source.section == "Title"]
    assert len(titles) == 1 and titles[0].is_map


def _planted_design(tmp_path, edit) -> Path:
    """A copy of the design with ``edit(checks)`` applied to its checks."""
    import yaml
    data = yaml.safe_load(lg.DESIGN_PATH.read_text(encoding="utf-8"))
    edit(data["checks"])
    path = tmp_path / f"design{len(list(tmp_path.glob('design*.yml')))}.yml"     # a new name: lg.load is cached
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def test_a_check_names_one_entry_that_exists(tmp_path):
    """The join of a check and its entry is written once, in the design: a check names an entry that exists, as a
    claim of it or a finding beyond it, never both."""
    def unknown(checks):
        checks["low_rank/softmax-rho1-to-zero"]["claim"] = "no-such-entry"

    def both(checks):
        checks["low_rank/softmax-rho1-to-zero"]["beyond"] = "theorem-4-4"

    for edit in (unknown, both):
        with pytest.raises(ValueError, match="must be one ledger entry"):
            lg.load(lg.LEDGER_PATH, _planted_design(tmp_path, edit))
    moved = lg.load(lg.LEDGER_PATH, _planted_design(
        tmp_path, lambda c: c["low_rank/thm44-n2-cBBT"].update(claim="low-rank-projection")))
    assert "low_rank/thm44-n2-cBBT" in moved.by_id("low-rank-projection").checks
    assert "low_rank/thm44-n2-cBBT" not in moved.by_id("theorem-4-4").checks


def test_a_check_id_is_written_in_at_most_two_source_files():
    """One source for each check: its design (book/design.yml, which also names its ledger entry) and the module
    that computes it. The ledger, the answer boxes, the plots and the tables name none (they use the computing
    module's constants). Planted: an id written into a third file is found."""
    import yaml
    root = lg.ROOT
    design = yaml.safe_load(lg.DESIGN_PATH.read_text(encoding="utf-8"))["checks"]
    ids = {k.split("/", 1)[1] for k in design} | {c for d in design.values() for c in d.get("controls") or {}}
    files = {p: p.read_text(encoding="utf-8") for p in [*(root / "src").rglob("*.py"), *(root / "tools").glob("*.py"),
                                                         *(root / "book").glob("*.yml")]}
    ledger_ids = re.compile(r"^\s*(- id|entry): .*$", re.M)          # an entry may be spelled like its one check
    files[lg.LEDGER_PATH] = ledger_ids.sub("", files[lg.LEDGER_PATH])
    for nb in (root / "notebooks").glob("*.ipynb"):
        files[nb] = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text(encoding="utf-8"))["cells"])

    def writers(cid, texts):
        pat = re.compile(r"(?<![\w-])" + re.escape(cid) + r"(?![\w-])")
        return sorted(str(p.relative_to(root)) for p, t in texts.items() if pat.search(t))

    over = {cid: w for cid in ids if len(w := writers(cid, files)) > 2}
    assert not over, f"check ids written in more than two source files: {over}"
    planted = {**files, root / "planted.py": 'ANSWER = "softmax-near-oracle"'}
    assert len(writers("softmax-near-oracle", planted)) == len(writers("softmax-near-oracle", files)) + 1


@pytest.mark.parametrize("statuses, expected", [
    ([lg.REPRODUCED, lg.REPRODUCED], lg.REPRODUCED),
    ([lg.REPRODUCED, lg.INCONCLUSIVE], lg.INCONCLUSIVE),
    ([lg.INCONCLUSIVE, lg.NOT_REPRODUCED], lg.NOT_REPRODUCED),
])
def test_combine(statuses, expected):
    assert lg.combine(statuses) == expected


def test_check_status_over_seed_sets():
    assert lg.check_status(True, [True, True]) == lg.REPRODUCED
    assert lg.check_status(False, [False, False]) == lg.NOT_REPRODUCED
    assert lg.check_status(True, [True, False]) == lg.INCONCLUSIVE
    assert lg.check_status(False, None) == lg.NOT_REPRODUCED


def test_map_entry_depends_when_readings_disagree():
    e = lg.load().by_id("softmax-ge-linear")
    status = {c: lg.NOT_REPRODUCED for c in e.all_checks()}
    assert lg.verdict(e, status).status == lg.NOT_REPRODUCED
    tight = e.readings["clustered, tight"][0]
    status[tight] = lg.REPRODUCED
    v = lg.verdict(e, status)
    assert v.status == lg.DEPENDS and v.parts["clustered, tight"] == lg.REPRODUCED
    assert lg.verdict(e, {}).missing == e.all_checks()


def test_render_quote_sets_extracted_tex_as_maths():
    """A PDF extraction's plain-text copy glued to its TeX becomes maths; the ledger's quote stays verbatim."""
    q = ("increasing the inner dimension of MKMQ\\mathbf{M}_K^\\top \\mathbf{M}_Q will not change the optimal value of "
         "M=MKMQ\\mathbf{M}=\\mathbf{M}_K^\\top \\mathbf{M}_Q, so our results will not change.")
    assert lg.render_quote(q) == ("increasing the inner dimension of $\\mathbf{M}_K^\\top \\mathbf{M}_Q$ will not "
                                  "change the optimal value of $\\mathbf{M}=\\mathbf{M}_K^\\top \\mathbf{M}_Q$, so our "
                                  "results will not change.")
    kept = "the bound $w < (nL^2/\\sigma^2)^{2/d}$ holds"
    assert lg.render_quote(kept) == kept                  # maths already delimited is left alone
    assert lg.render_quote("where $$w < n^{2/d}$$ holds") == "where $\\displaystyle w < n^{2/d}$ holds"
    for _, quote in lg.load().quotes():                   # no backslash outside maths, no $$ inside a sentence
        shown = lg.render_quote(quote.quote)
        assert "$$" not in shown and "\\" not in re.sub(r"\$.*?\$", "", shown), quote.quote


def test_a_papers_headline_names_its_own_entries_and_their_checks(tmp_path):
    """A paper's ``headline`` (the landing page's sentence) must name entries of that paper, each with exactly one
    check flagged ``headline`` in the design, or none for an entry with readings, and a flagged check's entry must be
    in a headline; else loading the ledger says which and what is allowed."""
    import yaml

    data = yaml.safe_load(lg.LEDGER_PATH.read_text(encoding="utf-8"))
    for bad, words in (({"entry": "softmax-ge-linear", "text": "x"}, "is not one of its entries"),
                       ({"entry": "low-rank-projection", "text": "x"}, "exactly one of its checks flagged")):
        planted = dict(data, papers={k: dict(v) for k, v in data["papers"].items()})
        planted["papers"]["collins2024"]["headline"] = [*data["papers"]["collins2024"]["headline"], bad]
        path = tmp_path / "claims.yml"
        path.write_text(yaml.safe_dump(planted, allow_unicode=True), encoding="utf-8")
        with pytest.raises(ValueError, match=words):
            lg.load(path)
    with pytest.raises(ValueError, match="does not report"):
        lg.load(lg.LEDGER_PATH, _planted_design(
            tmp_path, lambda c: c["low_rank/softmax-rho1-to-zero"].update(headline=True)))
    with pytest.raises(ValueError, match="exactly one of its checks flagged"):
        lg.load(lg.LEDGER_PATH, _planted_design(
            tmp_path, lambda c: c["window_adaptation/softmax-near-oracle"].pop("headline")))
    headline = lg.load(lg.LEDGER_PATH).papers["collins2024"]["headline"]
    assert headline[0]["check"] == "window_adaptation/softmax-near-oracle"
