"""Checks decided by the statistical design: Run.decide, the decided status in records, the ledger's fifth category
and the rule that a check whose control does not fail is inconclusive."""

from __future__ import annotations

import math

import numpy as np
import pytest

from softmax_icl import stats
from softmax_icl.book import design, ledger as lg
from softmax_icl.book.records import make_claim
from softmax_icl.figures import FIGURES
from softmax_icl.book.run import Run
from softmax_icl.book.verdicts import FigureVerdicts

FIG, CID, CONTROL = "classification_kernel_gd", "softmax-ge-linear-uniform", "softmax-ge-linear-uniform-untrained"


@pytest.fixture()
def run(tmp_path):
    return Run(FIGURES[FIG], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))


def _samples(shift: float, n: int = 15, sd: float = 0.02) -> np.ndarray:
    t = design.load().entry(FIG, CID).test
    return stats.synthetic(n, t.threshold + shift, sd)


def test_decide_takes_the_designs_test_and_needs_evidence_to_pass(run):
    t = design.load().entry(FIG, CID).test
    kw = dict(source="test")
    ok = run.decide(CID, "no deficit", {"n=100": _samples(-t.margin)}, **kw)
    assert ok.status == "pass" and ok.passed and ok.decision["seeds"] == 15
    assert ok.threshold == t.text() and ok.decision["margin"] == t.margin
    bad = run.decide(CID, "deficit of twice the margin", {"n=100": _samples(+t.margin)}, **kw)
    assert bad.status == "fail" and not bad.passed
    # a mean on the threshold with a wide spread: no evidence either way -> inconclusive, never a pass
    unsure = run.decide(CID, "no evidence", {"n=100": stats.synthetic(3, t.threshold, 0.5)}, **kw)
    assert unsure.status == "inconclusive" and not unsure.passed
    assert unsure.line().startswith("INCONCLUSIVE")
    # every cell must pass; one failing cell fails the check
    both = run.decide(CID, "two cells", {"a": _samples(-t.margin), "b": _samples(+t.margin)}, **kw)
    assert both.status == "fail" and both.value == pytest.approx(both.decision["cells"][1]["hi"])


def test_a_statistic_still_moving_towards_a_pass_is_not_settled(run):
    t = design.load().entry(FIG, CID).test
    x = _samples(+t.margin)                                              # fails at the end of training...
    steps = np.arange(0, 1001, 100)
    means = np.linspace(t.threshold + 5 * t.margin, x.mean(), steps.size)   # ...but still falling fast
    c = run.decide(CID, "moving", {"n=100": (x, steps, means)}, source="test")
    assert c.status == "not settled" and "last_quarter_change" in c.decision["cells"][0]
    flat = run.decide(CID, "flat", {"n=100": (x, steps, np.full(steps.size, x.mean()))},
                      source="test")
    assert flat.status == "fail"


def test_a_control_does_its_job_only_when_it_fails(run):
    t = design.load().entry(FIG, CID).test
    kw = dict(source="test")
    assert run.decide(CONTROL, "rival far worse", {"a": _samples(+t.margin)}, **kw).as_expected
    c = run.decide(CONTROL, "rival undecided", {"a": stats.synthetic(3, t.threshold, 0.5)}, **kw)
    assert c.status == "inconclusive" and not c.as_expected and "does not discriminate" in c.line()
    # over several cells a rival is rejected where it loses in one, each cell at the Bonferroni level
    some = run.decide(CONTROL, "rival as good in one cell, far worse in another",
                      {"a": _samples(-t.margin), "b": _samples(+t.margin)}, **kw)
    assert some.as_expected and some.decision["alpha"] == pytest.approx(stats.ALPHA / 2)
    assert some.value == pytest.approx(some.decision["cells"][1]["hi"])           # its clearest failure
    edge = stats.synthetic(15, t.threshold + 1.9 * 0.02 / math.sqrt(15), 0.02)    # fails at 5 %, not at 5 % / 2
    assert run.decide(CID, "edge", {"a": edge}, source="test").status == "fail"
    assert not run.decide(CONTROL, "edge rival", {"a": edge, "b": _samples(-t.margin)}, **kw).as_expected
    with pytest.raises(KeyError, match="statistical design"):         # a control the design does not list
        run.decide(CID + "-nope", "x", {"a": _samples(0.0)}, **kw)
    with pytest.raises(KeyError, match="statistical design"):
        run.decide("no-such-check", "x", {"a": _samples(0.0)}, source="test")


def test_what_a_check_is_comes_from_the_design_alone(run):
    """One source for each check: its kind, the check a control belongs to and the ledger entry a claim tests (or a
    finding goes beyond) are read from the design, never passed by the chapter's code."""
    t = design.load().entry(FIG, CID).test
    claim = run.decide(CID, "claim", {"a": _samples(-t.margin)}, source="test")
    assert (claim.kind, claim.ledger, claim.control_of) == ("claim", "softmax-ge-linear", None)
    rival = run.decide(CONTROL, "rival", {"a": _samples(+t.margin)}, source="test")
    assert (rival.kind, rival.ledger, rival.control_of) == ("control", None, CID)
    beyond = run.decide("softmax-ge-linear-other-n", "finding", {"a": _samples(-t.margin)}, source="test")
    assert (beyond.kind, beyond.ledger) == ("finding", "softmax-ge-linear")
    own = run.decide("anisotropic-kernel-gd-fits-better", "finding", {"a": stats.synthetic(15, 1.0, 0.02)},
                     source="test")
    assert (own.kind, own.ledger) == ("finding", None)
    with pytest.raises(ValueError, match="kind='finding'.*the design"):      # a caller may assert it, not change it
        run.decide(CID, "claim", {"a": _samples(0.0)}, source="test", kind="finding")
    with pytest.raises(ValueError, match="ledger='nn-window'"):
        run.decide(CID, "claim", {"a": _samples(0.0)}, source="test", ledger="nn-window")
    assert run.decide(CONTROL, "rival", {"a": _samples(+t.margin)}, source="test", kind="control",
                      control_of=CID).as_expected


def test_make_claim_rejects_a_status_that_disagrees_with_passed():
    with pytest.raises(ValueError, match="allowed values"):
        make_claim(FIG, "x", "s", 1.0, False, "t", kind="finding", source="s", status="maybe")
    with pytest.raises(ValueError, match="disagrees"):
        make_claim(FIG, "x", "s", 1.0, True, "t", kind="finding", source="s", status="fail")


def test_ledger_orders_the_five_categories():
    R, N, I, S = lg.REPRODUCED, lg.NOT_REPRODUCED, lg.INCONCLUSIVE, lg.NOT_SETTLED
    assert lg.combine([R, S, I]) == S and lg.combine([S, N]) == N and lg.combine([R, I]) == I
    assert lg.check_status(False, [True, True], "not settled") == S       # the decision, not the seed sets
    assert lg.check_status(True, [False], "pass") == R
    assert lg.check_status(True, [True, False]) == I                        # an undecided check: the seed sets
    assert len(lg.CATEGORIES) == 5 and S in lg.CATEGORIES


def test_a_passing_check_whose_control_does_not_fail_is_inconclusive():
    claim = {"id": CID, "kind": "claim", "passed": True, "status": "pass"}
    for ctrl, want in (({"status": "fail", "passed": False}, lg.REPRODUCED),
                       ({"status": "inconclusive", "passed": False}, lg.INCONCLUSIVE),
                       ({"passed": True}, lg.INCONCLUSIVE), ({"passed": False}, lg.REPRODUCED)):
        control = {"id": CONTROL, "kind": "control", "control_of": CID, **ctrl}
        fv = FigureVerdicts(FIG, {"claims": [claim, control]})
        assert fv.status(claim) == want, ctrl
    assert math.isinf(stats.bounds([1.0])[2])


def test_a_check_on_several_metrics_needs_every_metric_and_its_rival_fails_on_one(run):
    """The alignment claims decide on six metrics, each with its own test; the rival that differs only in the rate
    (the GD step at half its rate) matches on the scale-blind cosine and fails on the loss: it is rejected."""
    cid, half = "linear-sa-matches-gd-step", "linear-sa-matches-gd-step-half-rate"
    metrics = design.load().entry(FIG, cid).metrics
    good = {m: stats.synthetic(15, t.good, 0.005) for m, t in metrics.items()}
    c = run.decide(cid, "six metrics", good, source="test")
    assert c.status == "pass" and {x["label"] for x in c.decision["cells"]} == set(metrics)
    assert all(m in c.threshold for m in metrics)
    rival = dict(good, loss_rel_diff=stats.synthetic(15, metrics["loss_rel_diff"].bad, 0.005))
    r = run.decide(half, "half rate", rival, source="test")
    assert r.status == "fail" and r.as_expected
    same = run.decide(half, "a rival as good as the claim", good, source="test")
    assert same.status == "pass" and not same.as_expected
    with pytest.raises(ValueError, match="decides on the metrics"):
        run.decide(cid, "one metric missing", {m: v for m, v in good.items() if m != "prob_l2"},
                   source="test")
