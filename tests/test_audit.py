"""The seed audit keeps statuses and deciding intervals: planted records, no run."""

import pytest

from softmax_icl import profiles
from softmax_icl.book import audit
from softmax_icl.figures import FIGURES


def _decided(id, status, lo, hi, kind="claim", **extra):
    """A check decided on seeds by an 'above 0.9' test: its deciding cell has bounds ``lo`` .. ``hi`` (the lower one
    decides), beside a cell far above the threshold."""
    cells = [{"label": "far", "mean": 5.0, "lo": 4.0, "hi": 6.0, "test": "above", "threshold": 0.9,
              "verdict": "pass"},
             {"label": "near", "mean": (lo + hi) / 2, "lo": lo, "hi": hi, "test": "above", "threshold": 0.9,
              "verdict": status}]
    return {"id": id, "statement": f"statement of {id}", "passed": status == "pass", "value": lo, "threshold": "> 0.9",
            "kind": kind, "source": "s", "status": status,
            "decision": {"test": "above", "threshold": 0.9, "margin": 0.05, "cells": cells}, **extra}


def _record(claims):
    return {"notebook": "low_rank", "profile": "default", "claims": claims, "provenance": {"git_revision": "abc"}}


def _audited(committed, per_set):
    """An audit record of ``committed`` (a list of checks) with one record per set (a list of checks, or None)."""
    offsets = audit.set_offsets(len(per_set))
    return audit.build_record("low_rank", _record(committed),
                              [(off, {}, None if cs is None else _record(cs)) for off, cs in zip(offsets, per_set)])


def test_the_earlier_pool_is_the_profile_values_and_the_fresh_sets_lie_above_the_book_pool():
    assert profiles.BOOK_POOL == 10000
    offsets = audit.set_offsets(5)
    assert len(offsets) == 5 and offsets[0] == audit.EARLIER_POOL == 0
    assert offsets[1:] == [profiles.BOOK_POOL + 1000 * k for k in (1, 2, 3, 4)]
    assert [audit.set_name(o) for o in offsets] == ["the earlier pool"] + [f"fresh set {k}" for k in (1, 2, 3, 4)]
    for fig in FIGURES.values():
        seeds = {n: p.value("default") for n, p in fig.params.items() if n.endswith("_seed")}
        assert seeds and all(p.pool for n, p in fig.params.items() if n.endswith("_seed"))
        base = {n: fig.params[n].values["default"] for n in seeds}           # the earlier pool's seeds
        assert seeds == {n: v + profiles.BOOK_POOL for n, v in base.items()}  # the book's own runs: the pool
        # relative to the book's pool the earlier pool is -BOOK_POOL: the base values themselves
        assert audit.seed_overrides(fig, "default", 0) == base
        assert audit.seed_overrides(fig, "default", offsets[2]) == {n: v + 2000 for n, v in seeds.items()}


def test_the_sets_follow_the_book_pool_constant(monkeypatch):
    monkeypatch.setattr(profiles, "BOOK_POOL", 50000)
    fig = FIGURES["low_rank"]
    assert audit.set_offsets(3) == [0, 51000, 52000]
    assert audit.seed_overrides(fig, "default", 0) == {n: p.values["default"] for n, p in fig.params.items()
                                                        if n.endswith("_seed")}
    assert fig.params["basis_seed"].value("default") == 50002
    assert audit.set_name(52000) == "fresh set 2" and audit.set_name(12000) == "the seeds at offset 12000"
    with pytest.raises(ValueError):
        audit.set_offsets(1)


def test_the_record_keeps_each_sets_offset_status_and_deciding_interval():
    record = _audited([_decided("a", "pass", 0.95, 0.99)], [[_decided("a", "pass", 0.91, 0.93)], None])
    assert record["format"] == 2 and record["book_pool"] == profiles.BOOK_POOL
    assert [(s["offset"], s["name"], s["completed"]) for s in record["sets"]] == [
        (0, "the earlier pool", True), (profiles.BOOK_POOL + 1000, "fresh set 1", False)]
    check = record["checks"][0]
    assert check["committed"]["status"] == "pass"
    assert (check["committed"]["cell"], check["committed"]["lo"], check["committed"]["hi"],
            check["committed"]["bound"]) == ("near", 0.95, 0.99, 0.95)      # the worst cell, not the far one
    assert check["sets"][0]["status"] == "pass" and check["sets"][0]["bound"] == 0.91 and check["sets"][1] is None
    assert record["committed_claims"][0]["status"] == "pass"


def test_a_set_that_is_not_settled_where_the_run_passes_disagrees():
    from softmax_icl.book.verdicts import FigureVerdicts

    committed = [_decided("a", "pass", 0.95, 0.99)]
    sets = [[_decided("a", "pass", 0.92 + 0.01 * k, 0.99)] for k in range(4)]
    sets.insert(2, [_decided("a", "not settled", 0.96, 0.99)])        # its interval passes, its status does not
    record = _audited(committed, sets)
    st = audit.stability("a", record, committed[0])
    assert (st.agree, st.ran, st.total) == (4, 5, 5) and not st.stable and not record["checks"][0]["stable"]
    assert audit.status(committed[0], record) == "inconclusive"
    fv = FigureVerdicts.from_records("low_rank", _record(committed), record)
    assert fv.audit is record and fv.stability(committed[0]).agree == 4
    assert fv.fresh(committed[0]).count(False) == 1          # the disagreeing set, as the ledger combines it


def test_an_audit_with_the_same_statuses_speaks_for_the_run_and_one_with_another_does_not():
    committed = [_decided("a", "pass", 0.95, 0.99), _decided("b", "not settled", 0.85, 0.99),
                 _decided("b-base", "fail", 0.1, 0.2, kind="control", control_of="b")]
    record = _audited(committed, [committed] * 5)
    assert audit.speaks_for(record, "low_rank", committed)
    assert all(audit.stability(c["id"], record, c).stable for c in committed)
    assert audit.status(committed[1], record) == "not settled"
    assert audit.status(committed[2], record) == "fails, as it must"
    # the run now says "fail" where the audited run was "not settled": another run, the audit does not speak for it
    moved = [committed[0], dict(committed[1], status="fail"), committed[2]]
    assert not audit.speaks_for(record, "low_rank", moved)
    assert audit.stability("b", record, moved[1]) is None


def test_the_agreement_in_words():
    committed = [_decided("a", "pass", 0.95, 0.99)]
    sets = [[_decided("a", "pass", lo, 0.99)] for lo in (0.91, 0.97, 0.95, 0.93)] + [[_decided("a", "fail", 0.2, 0.5)]]
    st = audit.stability("a", _audited(committed, sets), committed[0])
    assert st.text() == "4 of 5 seed sets agree (bounds 0.2 to 0.97)"
    assert st.short() == "4 of 5 agree"
    st = audit.stability("a", _audited(committed, sets[:4] + [None]), committed[0])
    assert st.text() == "4 of 4 seed sets agree (bounds 0.91 to 0.97; 1 did not run)" and st.stable


def test_an_older_record_of_booleans_is_still_read():
    legacy = {"figure": "low_rank", "profile": "default", "seed_offset": 1000, "committed_revision": "abc",
              "sets": [{"set": k, "seeds": {}, "completed": True} for k in (1, 2)],
              "checks": [{"id": "a", "kind": "claim", "committed": True, "fresh": [True, False],
                          "values": [1.0, 0.5], "stable": False}]}
    st = audit.stability("a", legacy, {"id": "a", "passed": True})
    assert (st.agree, st.ran) == (1, 2) and st.text() == "1 of 2 seed sets agree (values 0.5 to 1)"
    assert [(s["offset"], s["name"]) for s in audit.sets_of(legacy)] == [(1000, "fresh set 1"), (2000, "fresh set 2")]
    assert audit.stability("a", legacy, {"id": "a", "passed": False, "status": "not settled"}) is None


def test_the_counts_say_which_chapters_were_audited_with_how_many_sets_the_earlier_pool_among_them():
    from softmax_icl.book import ledger as lg
    from softmax_icl.book.pages import audit_scope
    from softmax_icl.book.verdicts import BookVerdicts, FigureVerdicts

    committed = [_decided("a", "pass", 0.95, 0.99)]
    record = _audited(committed, [committed] * 5)
    figures = {"low_rank": FigureVerdicts.from_records("low_rank", _record(committed), record),
               "window_adaptation": FigureVerdicts("window_adaptation", _record(committed))}
    short, long = audit_scope(BookVerdicts(figures, lg.load()))
    assert short == "1 of 2 chapters audited, with 5 seed sets each, the earlier pool among them"
    assert long.startswith("The seed audit reran 1 of 2 chapters: “low_rank” with 5 seed sets, the earlier pool")
    assert "and 4 fresh sets no committed run used" in long and "The other 1 chapter has no audit" in long
