"""The statistical design (book/design.yml): well formed, every check of the records designed, and every test able to
tell a deficit of twice its margin from none at the committed seed count."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from softmax_icl import stats
from softmax_icl.book import design as ds

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "book" / "results"


def _records():
    out = {}
    for p in sorted(RESULTS.glob("*.json")):
        out[p.stem] = json.loads(p.read_text())
    return out


def test_the_design_is_well_formed():
    d = ds.load()
    assert d.seeds["default"] >= 15 and d.seeds["paper"] >= 10
    for key, e in d.entries.items():
        assert e.quantity and e.cells and e.why, key
        tests = list(e.metrics.values()) or [e.test]
        assert all(t.margin > 0 for t in tests), key
    with pytest.raises(KeyError, match="not in the statistical design"):
        d.entry("low_rank", "no-such-check")
    with pytest.raises(ValueError, match="allowed values"):
        next(e for e in d.entries.values() if e.metrics).test_for("no-such-metric")
    assert ds.number("log(1/0.9)") == pytest.approx(np.log(1 / 0.9)) and ds.number("-log(2)") == -np.log(2)
    with pytest.raises(ValueError, match="not a number of the design"):
        ds.number("lg(2)")


def test_every_claim_check_is_followed_along_training_or_says_why_it_cannot_be():
    """A claim check that is not followed cannot be "not settled", so a statistic still moving at the end of training
    would become a verdict: every check of a ledger entry is followed (``trajectory``), is a computation without
    training (``exact``), or names in ``not_followed`` why its statistic has no path to follow."""
    import yaml
    d = ds.load()
    ledger = yaml.safe_load((ROOT / "book" / "claims.yml").read_text())
    checks = {c for e in ledger["claims"] for c in e.get("checks") or []}
    bare = [k for k in sorted(checks) if not d.entries[k].trajectory and not d.entries[k].test.exact
            and not str(d.entries[k].raw.get("not_followed") or "").strip()]
    assert not bare, "claim checks neither followed nor saying why: " + ", ".join(bare)


def test_a_followed_claim_check_records_its_path():
    """A followed check decided without its trajectory is an error of the check's code, not a settled verdict: the
    committed records carry a trajectory in every cell of every followed claim check, unless its design names the
    metrics it reads at the end of training only (``not_followed``)."""
    d = ds.load()
    def followed(key):
        e = d.entries.get(key)
        return e is not None and e.trajectory and not str(e.raw.get("not_followed") or "").strip()

    missing = [f"{fig}/{c['id']}: {x['label']}" for fig, rec in _records().items() for c in rec["claims"]
               if c.get("kind") == "claim" and followed(f"{fig}/{c['id']}")
               for x in _cells(c) if not x.get("exact") and "trajectory" not in x]
    assert not missing, "followed checks without a logged path: " + "; ".join(missing[:8])


def test_every_recorded_check_is_designed():
    """Each check of a committed record is a designed check or one of its listed rivals."""
    d = ds.load()
    missing = [f"{fig}/{c['id']}" for fig, rec in _records().items() for c in rec["claims"]
               if f"{fig}/{c['id']}" not in d.entries and f"{fig}/{c['id']}" not in d.parents]
    if any(not _cells(c) for rec in _records().values() for c in rec["claims"]):
        pytest.skip("some committed checks predate the design (they have no decided cells yet)")
    assert not missing, "checks without a design: " + ", ".join(missing)


def _cells(claim: dict) -> list:
    """The judged cells of a check decided by the design (``Run.decide``), or [] for a check of its own rule."""
    return (claim.get("decision") or {}).get("cells") or []


def _spreads() -> dict:
    """Per design key: (committed seed count, largest per-cell seed sd of the committed run), or the prospective
    spread of ``book/design_power.json`` where the committed records predate the design."""
    d, out = ds.load(), {}
    for fig, rec in _records().items():
        for c in rec["claims"]:
            key = f"{fig}/{c['id']}"
            if key not in d.entries or not _cells(c):
                continue
            sds = [x["sd"] for x in _cells(c) if x.get("sd") == x.get("sd") and x.get("n", 0) >= 2]
            if sds:
                out[key] = (int(max(x["n"] for x in _cells(c))), float(max(sds)))
    prospective = json.loads((ROOT / "book" / "design_power.json").read_text())
    for key, row in prospective.items():
        if key not in out and "sd_per_seed" in row and not d.entries[key].test.exact:
            out[key] = (int(d.seeds["default"]), float(row["sd_per_seed"]))
    return out


SPREADS = _spreads()


@pytest.mark.parametrize("key", sorted(SPREADS))
def test_a_deficit_of_twice_the_margin_fails_and_none_passes(key):
    """The synthetic-deficit test: for each test of the check (one per metric), a pair whose per-seed difference has
    the spread of the committed run and no deficit (the truth one margin on the claim's side of the threshold) must
    pass, and a pair with a deficit of twice the margin (one margin on the other side) must fail, at the committed
    seed count. A check without that power is listed on the design page as underpowered; it may not pass the first
    case, but it may never pass the second."""
    n, sd = SPREADS[key]
    e = ds.load().entries[key]
    for t in (list(e.metrics.values()) or [e.test]):
        rng = np.random.default_rng(0)
        base = rng.normal(1.0, 0.1, n)                      # model B, seed by seed
        good = base + stats.synthetic(n, t.good, sd)         # model A: B plus the statistic's synthetic values
        bad = base + stats.synthetic(n, t.bad, sd)
        assert stats.decide(t, bad - base).verdict != stats.PASS, f"{key}: a deficit of twice the margin passes"
        enough = stats.power(t, n, sd)[0] >= 0.8
        if enough:
            assert stats.decide(t, good - base).verdict == stats.PASS, f"{key}: no deficit does not pass"
            assert stats.decide(t, bad - base).verdict == stats.FAIL, f"{key}: twice the margin does not fail"


def test_the_design_page_is_written_from_the_committed_design_and_records(tmp_path):
    """book/design.md is what tools/design_power.py --page-only writes from book/design.yml and the records (rerun it
    after a regeneration)."""
    import subprocess
    import sys
    out = tmp_path / "design.md"
    subprocess.run([sys.executable, str(ROOT / "tools" / "design_power.py"), "--page-only", "--page", str(out)],
                   check=True, capture_output=True, cwd=ROOT)
    assert out.read_text() == (ROOT / "book" / "design.md").read_text(), \
        "book/design.md is stale: run python tools/design_power.py --page-only"
