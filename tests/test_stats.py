"""The verdict statistics (softmax_icl.stats): t quantiles, the three tests, power, synthetic samples, settling."""

from __future__ import annotations

import math

import numpy as np
import pytest

from softmax_icl import stats
from softmax_icl.stats import FAIL, INCONCLUSIVE, NOT_SETTLED, PASS, Test


@pytest.mark.parametrize("p, df, q", [(0.95, 1, 6.313752), (0.95, 2, 2.919986), (0.95, 9, 1.833113),
                                      (0.95, 14, 1.761310), (0.975, 2, 4.302653), (0.975, 30, 2.042272),
                                      (0.99, 5, 3.364930), (0.95, 1000, 1.646379)])
def test_t_quantiles_match_the_tables(p, df, q):
    assert stats.t_quantile(p, df) == pytest.approx(q, abs=2e-6)
    assert stats.t_quantile(1 - p, df) == pytest.approx(-q, abs=2e-6)
    assert stats.t_cdf(q, df) == pytest.approx(p, abs=1e-7)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="allowed values: below, above, equal"):
        Test("smaller", 0.1, 0.05)
    with pytest.raises(ValueError, match="margin must be > 0"):
        Test("below", 0.1, 0.0)
    with pytest.raises(ValueError, match="finite"):
        stats.decide(Test("below", 0.1, 0.05), [0.0, float("nan")])
    with pytest.raises(ValueError, match="p must lie"):
        stats.t_quantile(1.5, 3)


def test_a_pass_needs_evidence_not_the_absence_of_a_difference():
    """Three seeds with a large mean deficit and a wide spread: the old 'interval reaches 0' rule passed this;
    a non-inferiority test with margin 0.05 is inconclusive, and with fifteen seeds of the same spread it fails."""
    ni = Test("below", 0.05, 0.05)                 # deficit A - B must stay below the margin
    few = np.array([0.02, 0.30, 0.58])             # mean 0.30, sd 0.28: the 95 % t-interval reaches 0
    assert stats.decide(ni, few).verdict == INCONCLUSIVE
    many = stats.synthetic(15, 0.30, 0.28)
    assert stats.decide(ni, many).verdict == FAIL
    none = stats.synthetic(15, 0.0, 0.02)
    assert stats.decide(ni, none).verdict == PASS


@pytest.mark.parametrize("kind, c, m", [("below", 0.1, 0.1), ("above", math.log(1.5), math.log(1.5)),
                                        ("equal", 0.25, 0.25), ("below", 0.05, 0.05)])
def test_good_reference_passes_bad_reference_fails_when_the_design_has_power(kind, c, m):
    t = Test(kind, c, m)
    n, sd = 15, m / 2                             # a half-width of t(14) sd / sqrt(15) = 0.23 m: enough
    assert stats.decide(t, stats.synthetic(n, t.good, sd)).verdict == PASS
    assert stats.decide(t, stats.synthetic(n, t.bad, sd)).verdict == FAIL
    if kind == "equal":
        assert stats.decide(t, stats.synthetic(n, -t.bad, sd)).verdict == FAIL
    pw, false_pass = stats.power(t, n, sd)
    assert pw > 0.9 and false_pass < 0.01


def test_power_grows_with_seeds_and_falls_with_spread():
    t = Test("below", 0.05, 0.05)
    assert stats.power(t, 15, 0.05)[0] > stats.power(t, 3, 0.05)[0]
    assert stats.power(t, 15, 0.01)[0] > stats.power(t, 15, 0.1)[0]
    assert math.isnan(stats.power(Test("below", 0.1, 0.1, exact=True), 15, 0.01)[0])


def test_synthetic_samples_have_the_exact_mean_and_spread():
    x = stats.synthetic(10, 1.5, 0.3)
    assert x.mean() == pytest.approx(1.5, abs=1e-12) and x.std(ddof=1) == pytest.approx(0.3, abs=1e-12)


def test_an_exact_test_has_no_interval():
    t = Test("below", 1e-5, 1e-5, exact=True)
    assert stats.decide(t, [4e-7]).verdict == PASS and stats.decide(t, [0.9]).verdict == FAIL
    with pytest.raises(ValueError, match="one finite value"):
        stats.decide(t, [1.0, 2.0])


def test_one_seed_is_never_evidence():
    assert stats.decide(Test("below", 0.1, 0.1), [0.0]).verdict == INCONCLUSIVE


def test_settling_rule():
    t = Test("below", 0.1, 0.1)
    steps = [0, 250, 500, 750, 1000]
    # a statistic that failed but is still falling fast: its drift carried on for one more training length (4 x its
    # last quarter's change) takes its bound across the threshold: not settled
    d, verdict, delta = stats.verdict_of(t, stats.synthetic(15, 0.144, 0.02), steps, [1.0, 0.5, 0.3, 0.22, 0.144])
    assert d.verdict == FAIL and verdict == NOT_SETTLED and delta == pytest.approx(-0.076)
    # the same end value, nearly flat over the last quarter: the drift cannot carry it across: a settled failure
    assert stats.verdict_of(t, stats.synthetic(15, 0.144, 0.02), steps, [1.0, 0.5, 0.2, 0.15, 0.144])[1] == FAIL
    # a pass still falling (away from the threshold) stays a pass
    assert stats.verdict_of(t, stats.synthetic(15, 0.02, 0.01), steps, [1.0, 0.5, 0.3, 0.09, 0.02])[1] == PASS
    # a pass rising towards the threshold that one more length would carry across is not settled, however small
    # the rise (here less than half a margin)
    assert stats.verdict_of(t, stats.synthetic(15, 0.049, 0.01), steps, [1.0, 0.0, 0.0, 0.0, 0.049])[1] == NOT_SETTLED
    assert stats.verdict_of(t, stats.synthetic(15, 0.04, 0.01), steps, [1.0, 0.0, 0.0, 0.03, 0.04])[1] == PASS
    # an equality statistic: a drift that keeps |mean| inside the threshold is settled, one that would not, is not
    e = Test("equal", 0.25, 0.25)
    assert stats.verdict_of(e, stats.synthetic(15, 0.02, 0.05), steps, [0, 0, 0, 0.0, 0.02])[1] == PASS
    assert stats.verdict_of(e, stats.synthetic(15, 0.1, 0.05), steps, [0, 0, 0, 0.0, 0.1])[1] == NOT_SETTLED
    # the slope is read from every logged step of the last quarter (least squares), not only its two ends
    fine = np.arange(0, 1001, 100)
    wiggle = np.r_[np.linspace(1.0, 0.2, 8), [0.17, 0.21, 0.18]]     # steps 700..1000 oscillate around 0.19
    assert stats.verdict_of(t, stats.synthetic(15, 0.18, 0.02), fine, wiggle)[1] == FAIL
    with pytest.raises(ValueError, match="increasing steps"):
        stats.settled(t, [0, 0], [1.0, 1.0], PASS)


@pytest.mark.parametrize("test, end, drift", [
    # planted: a growth ratio x3.3 against x1.05 whose log still moves by 0.3 per quarter, both ways
    (Test("above", math.log(1.05), math.log(1.05)), math.log(3.3), 0.3),
    (Test("above", math.log(1.05), math.log(1.05)), math.log(3.3), -0.2),
    # planted: a ratio x0.086 against x0.95 still moving by a fifth of its log per quarter
    (Test("below", math.log(0.95), math.log(1 / 0.95)), math.log(0.086), 0.5),
])
def test_a_cell_clearing_its_threshold_by_many_margins_is_settled_however_much_it_moves(test, end, drift):
    steps = np.arange(0, 1001, 250)
    means = np.array([0.0, end / 2, end - drift, end - drift, end])
    samples = stats.synthetic(15, end, 0.1)
    d, verdict, delta = stats.verdict_of(test, samples, steps, means)
    assert abs(delta) > 4 * test.margin            # it moved by many margins in the last quarter...
    assert d.verdict == PASS and verdict == PASS   # ...and is settled: one more length cannot carry it across


def test_a_cell_the_drift_would_carry_across_is_not_settled():
    test = Test("above", math.log(1.05), math.log(1.05))
    steps = np.arange(0, 1001, 250)
    samples = stats.synthetic(15, math.log(1.12), 0.02)                 # passes today, by about two margins
    falling = [0.0, 0.3, 0.25, math.log(1.12) + 0.03, math.log(1.12)]      # falling by 0.03 per quarter
    assert stats.verdict_of(test, samples, steps, falling)[1] == NOT_SETTLED
    rising = [0.0, 0.0, 0.05, math.log(1.12) - 0.03, math.log(1.12)]
    assert stats.verdict_of(test, samples, steps, rising)[1] == PASS


def test_cells_combine_as_an_intersection_union_test_and_a_rival_fails_somewhere():
    t = Test("below", 0.1, 0.05)
    good, bad, mid = stats.synthetic(15, 0.0, 0.02), stats.synthetic(15, 0.2, 0.02), stats.synthetic(15, 0.1, 0.05)
    cells = [stats.Cell("a", good, t).judge(), stats.Cell("b", mid, t).judge()]
    assert [c["verdict"] for c in cells] == [PASS, INCONCLUSIVE]
    assert stats.combine([c["verdict"] for c in cells]) == INCONCLUSIVE
    assert stats.combine([PASS, FAIL, INCONCLUSIVE]) == FAIL and stats.combine([PASS, PASS]) == PASS
    assert stats.combine([PASS, NOT_SETTLED, INCONCLUSIVE]) == NOT_SETTLED
    # a rival is the same check on another model: rejected (FAIL) when one of its cells fails, each cell at the
    # Bonferroni level, so that a rival as good as the claim in every cell is rejected at most ALPHA of the time
    assert stats.combine([FAIL, PASS]) == FAIL and stats.combine([INCONCLUSIVE, PASS]) == INCONCLUSIVE
    assert stats.rival_alpha(1) == stats.ALPHA and stats.rival_alpha(4) == pytest.approx(stats.ALPHA / 4)
    edge = stats.synthetic(15, 0.1 + 1.9 * 0.02 / 15 ** 0.5, 0.02)        # fails at 5 %, not at 5 % / 8
    assert stats.Cell("e", edge, t).judge()["verdict"] == FAIL
    assert stats.Cell("e", edge, t, alpha=stats.rival_alpha(8)).judge()["verdict"] == INCONCLUSIVE
    with pytest.raises(ValueError, match="at least one cell"):
        stats.rival_alpha(0)
    c = stats.Cell("b", bad, t).judge()
    assert c["verdict"] == FAIL and stats.margin_over_threshold(c) < 0 < stats.margin_over_threshold(cells[0])
    with pytest.raises(ValueError, match="at least one cell"):
        stats.combine([])


def test_a_ratio_taken_as_a_log_lets_a_heavy_tailed_rival_fail():
    """Planted: a rival whose every seed (10, as at the paper scale) lies 6.5 to 181 times above a bar of 0.1 (the
    value row's untrained units).
    On the identity scale the heavy tail widens the t-interval until it straddles the bar (inconclusive: the rival
    "does not discriminate"); taken as a log, as the design takes every ratio for a claim and its rival alike, it
    fails, as it must. The trained units, far below the bar, pass on both scales."""
    rival = np.array([0.65, 0.66, 0.7, 0.72, 0.75, 0.8, 0.9, 1.0, 1.2, 18.1])
    assert stats.decide(Test("below", 0.1, 0.05), rival).verdict == INCONCLUSIVE
    assert stats.decide(Test("below", math.log(0.1), math.log(1.5)), np.log(rival)).verdict == FAIL
    trained = np.linspace(0.01, 0.03, 10)
    assert stats.decide(Test("below", 0.1, 0.05), trained).verdict == PASS
    assert stats.decide(Test("below", math.log(0.1), math.log(1.5)), np.log(trained)).verdict == PASS


def test_a_share_of_seeds_has_its_clopper_pearson_interval():
    lo, hi = stats.share_interval(9, 15)
    tail = lambda ks, p: sum(math.comb(15, k) * p ** k * (1 - p) ** (15 - k) for k in ks)  # noqa: E731
    assert tail(range(9, 16), lo) == pytest.approx(0.05) and tail(range(0, 10), hi) == pytest.approx(0.05)
    assert stats.share_interval(0, 15)[0] == 0.0 and stats.share_interval(15, 15)[1] == 1.0
    assert stats.share_interval(0, 15)[1] == pytest.approx(1 - 0.05 ** (1 / 15), abs=1e-6)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        stats.share_interval(16, 15)
