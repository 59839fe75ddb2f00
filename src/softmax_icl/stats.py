"""Verdicts from seeds: the tests a check uses, their confidence bounds, their power, and whether a statistic settled.

A check of the book is a statement about a statistic ``x`` measured once per independent seed (``x_1 .. x_N``; a
paired comparison measures the difference ``A_s - B_s`` of two models on the same seed, tasks and evaluation set). It
names, before any run (the book's design page, ``book/design.yml``), one of four tests, a threshold ``c`` in the
statistic's units and a margin ``m``:

* ``below``: the claim holds when the mean of ``x`` is below ``c`` ("rho -> 0", "no worse than B by more than m" with
  ``x = A - B`` and ``c = m``, "within a factor of the oracle");
* ``above``: the claim holds when the mean of ``x`` is above ``c`` ("grows by at least m", "beats B");
* ``equal``: the claim holds when ``|mean|`` is below ``c`` (two one-sided tests).

A computation without seeds (a construction, a population scan on a fixed Monte Carlo sample) is ``exact``: its one
value is held against ``c`` in the same direction, with no interval.

With ``N`` seeds the mean has one-sided ``1 - ALPHA`` Student-t bounds ``lo`` and ``hi``. A check **passes** when the
whole interval lies on the claim's side of ``c`` (``below``: ``hi < c``), **fails** when it lies wholly on the other
side (``lo > c``), and is **inconclusive** when it straddles ``c``: a pass needs evidence, never only the absence of a
detected difference. ``equal`` passes when ``-c < lo`` and ``hi < c``, fails when ``lo > c`` or ``hi < -c``.

The margin says what a deficit that matters is: the design's power is the probability that the test passes when the
truth sits one margin on the claim's side of ``c`` (``below``: at ``c - m``, e.g. no deficit at all for a
non-inferiority test with ``c = m``), and its false-pass rate the probability that it passes one margin on the other
side (at ``c + m``, a deficit of twice the margin). Both are computed from the seed spread with the normal
approximation of the t-test (:func:`power`).

A statistic logged along training **settled** unless its drift over the last quarter of training, carried on for one
more training length, would carry its deciding bounds to another verdict (:func:`settled`): a statistic still on its
way across the threshold is "not settled at this training length", never "not reproduced"; one that clears the
threshold by more than its drift can carry it has settled, however much it still moves.

NumPy only (no SciPy): the t quantiles come from the regularised incomplete beta function, tested against tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: One-sided error rate of every bound (a 90 % two-sided interval; 95 % one-sided bounds).
ALPHA = 0.05
TESTS = ("below", "above", "equal")
#: Verdicts of one check. "not settled" is given by :func:`settled` on top of the test's decision.
PASS, FAIL, INCONCLUSIVE, NOT_SETTLED = "pass", "fail", "inconclusive", "not settled"
VERDICTS = (PASS, FAIL, INCONCLUSIVE, NOT_SETTLED)
#: The share of training whose drift a settling check reads (its last quarter), and how many more training lengths
#: that drift is carried on for (:func:`settled`).
SETTLE_WINDOW = 0.25
SETTLE_HORIZON = 1.0


# -- Student's t without SciPy -----------------------------------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0; got {df}")
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on :func:`t_cdf`)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1); got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


# -- tests --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Test:
    """A check's test: its kind (:data:`TESTS`), threshold ``c`` and margin ``m`` in the statistic's units, and
    whether it is ``exact`` (one value computed without seeds, held against ``c`` with no interval)."""

    __test__ = False            # not a pytest test class

    kind: str
    threshold: float
    margin: float
    exact: bool = False

    def __post_init__(self):
        if self.kind not in TESTS:
            raise ValueError(f"test kind {self.kind!r} is not allowed; allowed values: {', '.join(TESTS)}")
        if not (math.isfinite(self.threshold) and math.isfinite(self.margin)):
            raise ValueError(f"a test's threshold and margin must be finite; got {self.threshold}, {self.margin}")
        if self.margin <= 0:
            raise ValueError(f"a test's margin must be > 0; got {self.margin}")
        if self.kind == "equal" and self.threshold <= 0:
            raise ValueError(f"an 'equal' test's threshold is the largest |mean| that counts as equal: > 0; got "
                             f"{self.threshold}")

    @property
    def good(self) -> float:
        """Where the truth sits when the claim holds by one margin (the power's reference)."""
        return {"below": self.threshold - self.margin, "above": self.threshold + self.margin,
                "equal": 0.0}[self.kind]

    @property
    def bad(self) -> float:
        """Where the truth sits when it misses the claim by one margin (the false-pass reference)."""
        return {"below": self.threshold + self.margin, "above": self.threshold - self.margin,
                "equal": self.threshold + self.margin}[self.kind]

    def text(self) -> str:
        """The test in words, e.g. ``mean < 0.1 (95 % upper bound; margin 0.05)``."""
        c, m = f"{self.threshold:.3g}", f"{self.margin:.3g}"
        if self.exact:
            return {"below": f"value < {c}", "above": f"value > {c}", "equal": f"|value| < {c}"}[self.kind] + \
                " (a computation without seeds)"
        b = f"{1 - ALPHA:.0%}"
        return {"below": f"mean < {c} ({b} upper bound; margin {m})",
                "above": f"mean > {c} ({b} lower bound; margin {m})",
                "equal": f"|mean| < {c} ({b} bounds on both sides; margin {m})"}[self.kind]


@dataclass(frozen=True)
class Decision:
    """A test on seeds: the verdict, the mean, its one-sided bounds, the number of seeds and their spread."""

    verdict: str
    mean: float
    lo: float
    hi: float
    n: int
    sd: float

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "mean": self.mean, "lo": self.lo, "hi": self.hi, "n": self.n, "sd": self.sd}


def bounds(samples, alpha: float = ALPHA) -> tuple[float, float, float, float]:
    """Mean, one-sided ``1 - alpha`` lower and upper t-bounds, and the sample standard deviation of ``samples``.

    NaN samples are an error (a seed whose statistic is undefined must be dealt with by the check, not dropped here).
    One sample gives infinite bounds: nothing can be concluded from one seed."""
    x = np.asarray(samples, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("a test needs at least one sample")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"samples must be finite; got {x.tolist()}")
    mean = float(x.mean())
    if x.size < 2:
        return mean, -math.inf, math.inf, math.nan
    sd = float(x.std(ddof=1))
    half = t_quantile(1.0 - alpha, x.size - 1) * sd / math.sqrt(x.size)
    return mean, mean - half, mean + half, sd


@dataclass(frozen=True)
class Estimate:
    """One value computed without seeds with its estimated Monte Carlo standard error (e.g. from the batch means of
    a population scan): the input of an ``exact`` test whose error is known. Its bounds are ``value -+ z se`` with
    ``z`` the one-sided ``1 - ALPHA`` normal quantile (1.645), so it passes, fails or is inconclusive as a seeded
    test does."""

    value: float
    se: float


def normal_quantile(p: float) -> float:
    """The ``p`` quantile of the standard normal distribution."""
    return math.sqrt(2.0) * _erfinv(2.0 * p - 1.0)


def decide(test: Test, samples, se: float | None = None, alpha: float = ALPHA) -> Decision:
    """The verdict of ``test`` on the per-seed ``samples`` with one-sided ``1 - alpha`` bounds (one value for an
    ``exact`` test: the bounds are the value itself, so it passes or fails; with its Monte Carlo standard error
    ``se``, the value -+ z se)."""
    if test.exact:
        x = np.asarray(samples, dtype=np.float64).ravel()
        if x.size != 1 or not np.isfinite(x[0]):
            raise ValueError(f"an exact test takes one finite value; got {x.tolist()}")
        half = 0.0 if se is None else normal_quantile(1.0 - alpha) * float(se)
        if not (math.isfinite(half) and half >= 0):
            raise ValueError(f"a Monte Carlo standard error must be finite and >= 0; got {se}")
        mean, lo, hi, sd = float(x[0]), float(x[0]) - half, float(x[0]) + half, (0.0 if se is None else float(se))
    else:
        mean, lo, hi, sd = bounds(samples, alpha)
    return Decision(_verdict_between(test, lo, hi), mean, lo, hi, int(np.asarray(samples).size), sd)


def power(test: Test, n: int, sd: float) -> tuple[float, float]:
    """(power, false-pass rate) of ``test`` with ``n`` seeds of spread ``sd``: the probability that it passes when the
    truth is at :attr:`Test.good`, and when it is at :attr:`Test.bad` (normal approximation of the t-test, with the
    t quantile of ``n - 1`` degrees of freedom). An ``exact`` test has neither (NaN)."""
    if test.exact or n < 2:
        return math.nan, math.nan
    if not sd > 0:
        return 1.0, 0.0
    se, tq = sd / math.sqrt(n), t_quantile(1.0 - ALPHA, n - 1)

    def p_pass(mu: float) -> float:
        c = test.threshold
        if test.kind == "below":
            return normal_cdf((c - mu) / se - tq)
        if test.kind == "above":
            return normal_cdf((mu - c) / se - tq)
        return max(0.0, normal_cdf((c - mu) / se - tq) - normal_cdf((-c - mu) / se + tq))

    return p_pass(test.good), p_pass(test.bad)


def synthetic(n: int, mean: float, sd: float) -> np.ndarray:
    """``n`` samples whose sample mean is exactly ``mean`` and sample standard deviation exactly ``sd`` (evenly spaced
    normal quantiles, rescaled): the input of the design's synthetic-deficit test."""
    if n < 2:
        raise ValueError(f"synthetic samples need n >= 2; got {n}")
    z = np.array([math.sqrt(2.0) * _erfinv(2.0 * (i + 0.5) / n - 1.0) for i in range(n)])
    z = (z - z.mean()) / z.std(ddof=1)
    return mean + sd * z


def _erfinv(y: float) -> float:
    """Inverse error function (Newton steps from Giles' approximation)."""
    if not -1.0 < y < 1.0:
        raise ValueError(f"erfinv needs |y| < 1; got {y}")
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5.0:
        w -= 2.5
        p = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                  0.246640727, 1.50140941):
            p = c + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                  1.00167406, 2.83297682):
            p = c + p * w
    x = p * y
    for _ in range(3):
        x -= (math.erf(x) - y) / (2.0 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


# -- settling -----------------------------------------------------------------------------------------------------

def settled(test: Test, steps, means, verdict: str, lo: float | None = None,
            hi: float | None = None) -> tuple[bool, float]:
    """Whether a statistic logged along training settled, and its change over the last quarter.

    ``steps``: the logged training steps (increasing, the last one the end of training); ``means``: the statistic's
    seed mean at each; ``lo``, ``hi``: the end-of-training bounds that decided ``verdict`` (the mean itself when not
    given). The drift is the least-squares slope of the mean over the logged steps of the last quarter (from the last
    one at or before 3/4 of training to the end); carried on for one more training length (``steps[-1] - steps[0]``)
    it moves the bounds by ``slope * length`` (:data:`SETTLE_HORIZON` lengths). The statistic settled unless the
    decision on the moved bounds differs from ``verdict``: a cell whose bound clears its threshold by more than the
    drift can carry it never is "not settled", however much it moves; a cell the drift would carry across is, however
    little it moves. Returns (settled, the change of the mean over the last quarter)."""
    steps, means = np.asarray(steps, dtype=np.float64), np.asarray(means, dtype=np.float64)
    if steps.size < 2 or test.exact:
        return True, 0.0
    if steps.shape != means.shape or np.any(np.diff(steps) <= 0):
        raise ValueError("settled() needs increasing steps and one mean per step")
    if not np.all(np.isfinite(means)):
        raise ValueError(f"settled() needs finite means; got {means.tolist()}")
    start = steps[0] + (1.0 - SETTLE_WINDOW) * (steps[-1] - steps[0])
    k = int(np.nonzero(steps <= start + 1e-9)[0][-1])
    delta = float(means[-1] - means[k])
    s, m = steps[k:], means[k:]
    slope = float(np.polyfit(s, m, 1)[0]) if s.size > 2 else delta / float(s[-1] - s[0])
    shift = slope * SETTLE_HORIZON * float(steps[-1] - steps[0])
    lo = float(means[-1]) if lo is None else float(lo)
    hi = float(means[-1]) if hi is None else float(hi)
    return _verdict_between(test, lo + shift, hi + shift) == verdict, delta


def _verdict_between(test: Test, lo: float, hi: float) -> str:
    """The decision of ``test`` on the bounds ``lo`` <= ``hi`` (:func:`decide`'s rule)."""
    c = test.threshold
    if test.kind == "below":
        return PASS if hi < c else FAIL if lo > c else INCONCLUSIVE
    if test.kind == "above":
        return PASS if lo > c else FAIL if hi < c else INCONCLUSIVE
    return PASS if (-c < lo and hi < c) else FAIL if (lo > c or hi < -c) else INCONCLUSIVE


def verdict_of(test: Test, samples, steps=None, means=None, se: float | None = None,
               alpha: float = ALPHA) -> tuple[Decision, str, float | None]:
    """The decision on ``samples`` (an exact test's value with its standard error ``se``, if estimated) and the
    check's final verdict (NOT_SETTLED when the logged trajectory ``steps`` / ``means`` did not settle), with the last
    quarter's change (None without a trajectory)."""
    d = decide(test, samples, se, alpha)
    if steps is None:
        return d, d.verdict, None
    ok, delta = settled(test, steps, means, d.verdict, d.lo, d.hi)
    return d, (d.verdict if ok else NOT_SETTLED), delta


# -- shares ---------------------------------------------------------------------------------------------------------

def share_interval(k: int, n: int, alpha: float = ALPHA) -> tuple[float, float]:
    """Clopper-Pearson two-sided ``1 - 2 alpha`` interval (90 %, the design's one-sided 95 % bounds on each side) of a
    share of ``k`` seeds out of ``n``, from the beta quantiles (bisection on :func:`_betainc`)."""
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"a share needs 0 <= k <= n and n >= 1; got k = {k}, n = {n}")

    def beta_quantile(p: float, a: float, b: float) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if _betainc(a, b, mid) < p else (lo, mid)
        return 0.5 * (lo + hi)

    lower = 0.0 if k == 0 else beta_quantile(alpha, k, n - k + 1)
    upper = 1.0 if k == n else beta_quantile(1.0 - alpha, k + 1, n - k)
    return lower, upper


# -- a check over cells --------------------------------------------------------------------------------------------

@dataclass
class Cell:
    """One cell of a check: its label (a setting, a context length, a metric...), the per-seed ``samples`` of its
    statistic (one value for an exact test), its ``test``, and optionally the statistic's seed mean ``means`` at the
    logged training ``steps`` (for :func:`settled`); ``se``: an exact test's Monte Carlo standard error
    (:class:`Estimate`)."""

    label: str
    samples: np.ndarray
    test: Test
    steps: np.ndarray | None = None
    means: np.ndarray | None = None
    se: float | None = None
    #: one-sided error rate of its bounds (a rival judged over K cells takes ALPHA / K: :func:`rival_alpha`)
    alpha: float = ALPHA

    def judge(self) -> dict:
        d, verdict, delta = verdict_of(self.test, self.samples, self.steps, self.means, self.se, self.alpha)
        out = {"label": self.label, **d.as_dict(), "decision": d.verdict, "verdict": verdict,
               "test": self.test.kind, "threshold": self.test.threshold, "margin": self.test.margin,
               "exact": self.test.exact, "alpha": self.alpha, "samples": [float(x) for x in np.asarray(self.samples).ravel()]}
        if delta is not None:
            out["last_quarter_change"] = delta
            out["trajectory"] = {"steps": [float(s) for s in self.steps], "means": [float(m) for m in self.means]}
        return out


def combine(verdicts: list[str]) -> str:
    """The verdict of a check from its cells' verdicts: it passes when every cell passes, fails when any cell fails
    (settled), and is otherwise not settled (a cell not settled) or inconclusive. A control is the same check run on a
    rival, combined by the same rule: the rival is rejected (it FAILS, as it must) when one of its cells fails, its
    cells judged at :func:`rival_alpha` so that a rival as good as the claim everywhere is rejected somewhere with
    probability at most ALPHA."""
    if not verdicts:
        raise ValueError("a check needs at least one cell")
    if all(v == PASS for v in verdicts):
        return PASS
    if any(v == FAIL for v in verdicts):
        return FAIL
    return NOT_SETTLED if any(v == NOT_SETTLED for v in verdicts) else INCONCLUSIVE


def rival_alpha(cells: int) -> float:
    """The one-sided error rate of each of a rival's ``cells`` (Bonferroni): "the rival fails in some cell" is a
    union over the cells, so each is judged at ALPHA / cells for the rejection to hold at ALPHA overall. (A claim
    needs every cell to pass, an intersection: each cell at ALPHA suffices.)"""
    if cells < 1:
        raise ValueError(f"a rival has at least one cell; got {cells}")
    return ALPHA / cells


def worst_bound(cell: dict) -> float:
    """The bound of a judged cell that decides it: the upper bound of a 'below' test, the lower of an 'above' test,
    the larger |bound| of an 'equal' test (its distance to the claim's side)."""
    if cell["test"] == "below":
        return cell["hi"]
    if cell["test"] == "above":
        return cell["lo"]
    return max(abs(cell["lo"]), abs(cell["hi"]))


def margin_over_threshold(cell: dict) -> float:
    """How far a judged cell's deciding bound clears its threshold, in the statistic's units (negative: it does not):
    the book's "margin over the rival" and "margin to the threshold" are read from it."""
    b, c = worst_bound(cell), cell["threshold"]
    return {"below": c - b, "above": b - c, "equal": c - b}[cell["test"]]
