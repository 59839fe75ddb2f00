"""Generalisation: every pretrained unit tested on every class and context length (Figure 5, Theorem 3.5).

Every unit is tested on every class at the test L and at every test context length. The errors at all test
context lengths come from one pass over the evaluation set (:func:`softmax_icl.metrics.icl_error_grid`): the
context is drawn at the largest n, every shorter context is a prefix, and the scores of every unit are computed
once and shared by all test classes and context lengths. These are the tasks :func:`softmax_icl.metrics.icl_error`
draws with the same seed at n = max(n_test) (a test checks the two agree). Seeds are a batch axis of every sweep, so
one call evaluates every seed of every unit.

The checks followed along training (``book/design.yml``: trajectory) need their units at every logged step: those
units' logged matrices (every step and seed at once) are evaluated on the curve set, the first ``curve_tasks`` tasks
of the same evaluation set at the lengths n <= n_train (:func:`curves`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...baselines import nadaraya_watson_oracle, nw_matrices
from ...metrics import MIN_CHUNK, icl_error_grid, spectral_norm
from ...book.run import Run
from ...tasks import InputSpec
from ...training import SweepResult
from .sweeps import MODELS, theory_dims

#: Nadaraya-Watson bandwidths M = w I scanned for the oracle (tuned per test class and n).
ORACLE_W_GRID = tuple(np.round(np.geomspace(0.1, 1000.0, 24), 6))
#: Fraction of pretraining (the last log points) over which the loss trend is measured.
CONVERGENCE_WINDOW = 0.25
#: Signed bandwidths M = w I along which the pretraining loss of the mismatch class is scanned.
LANDSCAPE_W = tuple(np.round(np.concatenate([-np.geomspace(100.0, 0.1, 13), [0.0], np.geomspace(0.1, 1000.0, 17)]), 6))
#: Largest number of (unit x test x task x context point) weights one evaluation call holds (the curve units are
#: evaluated in blocks of units of this size: memory only, every block sees the same tasks).
CURVE_ELEMENTS = 2.0e7


def matched_bound(L: float, sigma: float, n, d: int) -> np.ndarray:
    """Theorem 3.5's matched-L bound as the slides write it (constant 1): L^(2 - 2/(d+2)) (sigma^2 / n)^(1/(d+2)),
    at every context length in ``n``."""
    n = np.asarray(n, dtype=np.float64)
    return L ** (2.0 - 2.0 / (d + 2)) * (sigma**2 / n) ** (1.0 / (d + 2))


def upper_half(ns) -> list:
    """The upper half of an increasing grid of context lengths, from its median up (Theorem 3.5's "large enough
    n")."""
    ns = list(ns)
    return ns[len(ns) // 2:]


def loglog_slope(ns, err) -> np.ndarray:
    """Least-squares slope of log(err) against log(n) along the last axis."""
    x = np.log(np.asarray(ns, dtype=np.float64))
    y = np.log(np.asarray(err, dtype=np.float64))
    xc = x - x.mean()
    return ((y - y.mean(-1, keepdims=True)) * xc).sum(-1) / (xc**2).sum()


def index_of(seq, v) -> int:
    """Position of ``v`` on the grid ``seq`` (of the figure's parameters: numbers or class names), looked up exactly:
    a value that is not on the grid is an error naming the grid, never the nearest value."""
    for i, x in enumerate(seq):
        if x == v:
            return i
    raise ValueError(f"{v!r} is not on the grid {list(seq)!r}")


def loss_trend(loss_history: np.ndarray, window: float = CONVERGENCE_WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """Fitted relative change of the training loss over the last ``window`` of pretraining, and its standard error.

    ``loss_history`` (T, C): mean loss since the previous log point (row 0 is step 0, nothing trained). A straight
    line is fitted to the last log points; the change it predicts across the window is divided by their mean loss.
    Returns two (C,) arrays.
    """
    h = np.asarray(loss_history, dtype=np.float64)[1:]
    k = max(3, int(round(window * len(h))))
    y = h[-k:]
    x = np.arange(k, dtype=np.float64)
    xc = x - x.mean()
    slope = (xc[:, None] * (y - y.mean(0))).sum(0) / (xc**2).sum()
    resid = y - y.mean(0) - slope * xc[:, None]
    se = np.sqrt((resid**2).sum(0) / max(k - 2, 1) / (xc**2).sum())
    mean = y.mean(0)
    return slope * (k - 1) / mean, se * (k - 1) / mean


def two_branch_fit(L_prime, err) -> tuple[np.ndarray, np.ndarray]:
    """Fit err(L') = a L'^2 + b (Theorem 3.5's two branches: bias ~ L'^2 above, a flat noise floor below) by least
    squares on relative residuals, along the last axis. Returns (a, b), each of the leading shape."""
    Lp = np.asarray(L_prime, dtype=np.float64)
    e = np.asarray(err, dtype=np.float64)
    flat = e.reshape(-1, e.shape[-1])
    ab = np.stack([np.linalg.lstsq(np.stack([Lp**2 / row, 1.0 / row], 1), np.ones_like(row), rcond=None)[0]
                   for row in flat])
    return ab[:, 0].reshape(e.shape[:-1]), ab[:, 1].reshape(e.shape[:-1])


@dataclass(frozen=True)
class TheoryAtD:
    """Theorem 3.5 at one input dimension: units of the theorem's class pretrained at L_unit[0] (small, the control)
    and L_unit[1] = L_test (matched), one per context length n and seed (S)."""

    d: int
    n: list                       # (N,) pretraining (and test) context lengths
    L_unit: list                  # pretraining L of the two unit families
    L_prime: np.ndarray           # (F,) test L'
    error: np.ndarray             # (2, N, S, F, N): unit (L, n_pretrain, seed) on test L' at test n
    oracle: np.ndarray            # (F, N) best-bandwidth NW, re-tuned per L' and n
    w_signed: np.ndarray          # (2, N, S) tr(M) / d
    sigma: float                  # label noise of pretraining and test

    @property
    def bound(self) -> np.ndarray:
        """(N,): Theorem 3.5's matched bound at L = L_unit[1] and every n (:func:`matched_bound`)."""
        return matched_bound(self.L_unit[1], self.sigma, self.n, self.d)

    @property
    def at_nmax(self) -> np.ndarray:
        """(2, S, F): units pretrained and tested at the largest n, every L'."""
        return self.error[:, -1, :, :, -1]

    def matched_rate(self, f1: int) -> np.ndarray:
        """(S, N): the matched unit pretrained at each n, tested at that n on L' = L_test (column ``f1``)."""
        N = len(self.n)
        return np.stack([self.error[1, j, :, f1, j] for j in range(N)], -1)


@dataclass(frozen=True)
class Curves:
    """The units of the trajectory checks at every logged step, on the curve set (K units, T_log logged steps, S
    seeds, T test classes at the test L, Nc test lengths n <= n_train)."""

    units: list                   # K (pretraining class, L)
    steps: np.ndarray             # (T_log,) logged pretraining steps
    n: list                       # (Nc,) test context lengths
    error: np.ndarray             # (K, T_log, S, T, Nc) ICL error
    oracle: np.ndarray            # (T, Nc) ICL error of the oracle's tuned bandwidths on the curve set

    def of(self, cls: str, L: float) -> np.ndarray:
        """(T_log, S, T, Nc): the unit pretrained on ``cls`` at ``L``."""
        return self.error[index_of(self.units, (cls, L))]


@dataclass(frozen=True)
class GeneralizationAnalysis:
    """Errors of every unit on every test setting, references and windows (P classes, nL values of L, S seeds,
    T test classes, N test context lengths)."""

    classes: list                 # pretraining classes (also the test classes)
    L: list                       # pretraining Lipschitz constants
    n: list                       # test context lengths
    tests: list                   # test settings (dicts)
    n_train: int
    L_test: float
    softmax: np.ndarray           # (P, nL, S, T, N) ICL error
    linear: np.ndarray            # (P, S, T, N) ICL error of the linear unit pretrained on class p at L_test
    oracle: np.ndarray            # (T, N) best-bandwidth Nadaraya-Watson error
    oracle_w: np.ndarray          # (T, N) its bandwidth
    zero: np.ndarray              # (T, N) ICL error of M = 0 (the uniform average; the identical-units rival)
    M_norm: np.ndarray            # (P, nL, S) ||M||_2 of every softmax unit
    M_norm_history: np.ndarray    # (P, nL, T_log, S)
    log_steps: np.ndarray         # (T_log,)
    w_signed: np.ndarray          # (P, nL, S) tr(M) / d: negative = the unit attends away from the query
    landscape: np.ndarray         # (nL, W) pretraining loss of the mismatch class along M = w I
    landscape_w: np.ndarray       # (W,)
    theory: list                  # TheoryAtD per dimension
    curves: Curves                # the trajectory checks' units along pretraining
    loss_change: dict             # sweep name -> (C,) fitted relative loss change over the last quarter
    loss_change_se: dict          # sweep name -> (C,) its standard error


def analyse(run: Run, results: dict[str, SweepResult]) -> GeneralizationAnalysis:
    """ICL errors of every unit on every test class and n, the linear and oracle references, window sizes."""
    cfg = run.cfg
    spec = InputSpec(d=cfg["d"])
    classes, Ls, ns = cfg["pretrain_classes"], cfg["L_pretrain"], cfg["n_test"]
    tests = [dict(function_class=c, L=cfg["L_test"], sigma=cfg["sigma"]) for c in classes]
    w_grid = np.asarray(ORACLE_W_GRID)

    def evaluate():
        kw = dict(spec=spec, device=run.device)
        out = {}
        for m in MODELS:                # softmax: the units and, last, M = 0 (the same tasks in the same call)
            M = results[m].M if m == "linear" else np.concatenate([results[m].M, np.zeros((1, cfg["d"], cfg["d"]))])
            out[m], out[f"{m}_se"] = icl_error_grid(m, M, tests, ns, n_tasks=cfg["eval_tasks"],
                                                   eval_seed=cfg["eval_seed"], **kw)
        out["zero"] = out["softmax"][-1]
        out["softmax"], out["softmax_se"] = out["softmax"][:-1], out["softmax_se"][:-1]
        out["oracle_w"], out["oracle"], _ = nadaraya_watson_oracle(
            tests, ns, spec, w_grid, n_tune=min(4096, cfg["eval_tasks"]), n_eval=cfg["eval_tasks"],
            tune_seed=cfg["eval_seed"] + 100, eval_seed=cfg["eval_seed"], device=run.device)
        # the pretraining objective of the mismatch class along M = w I (w of either sign), at every pretraining L
        pre = [dict(function_class=cfg["mismatch_class"], L=L, sigma=cfg["sigma"]) for L in Ls]
        land, _ = icl_error_grid("softmax", np.asarray(LANDSCAPE_W)[:, None, None] * np.eye(cfg["d"]), pre,
                              [cfg["n_train"]], n_tasks=min(4096, cfg["eval_tasks"]), eval_seed=cfg["eval_seed"] + 200,
                              **kw)
        out["landscape"] = land[..., 0].T                                         # (nL, W)
        for d, ns_d in theory_dims(cfg):
            res, spec_d = results[f"theory_d{d}"], InputSpec(d=d)
            tl = theory_tests(cfg)
            out[f"theory_d{d}"], _ = icl_error_grid("softmax", res.M, tl, ns_d, spec_d, n_tasks=cfg["eval_tasks"],
                                                    eval_seed=cfg["eval_seed"], device=run.device)   # (C, F, N)
            _, out[f"theory_d{d}_oracle"], _ = nadaraya_watson_oracle(
                tl, ns_d, spec_d, n_tune=min(4096, cfg["eval_tasks"]), n_eval=cfg["eval_tasks"],
                tune_seed=cfg["eval_seed"] + 100, eval_seed=cfg["eval_seed"], device=run.device)
        return out

    key = {"layout": 5, "train": {m: r.sweep for m, r in results.items()}, "tests": tests, "n_test": ns,
           "theory_tests": theory_tests(cfg),
           "eval_tasks": cfg["eval_tasks"], "eval_seed": cfg["eval_seed"], "w_grid": list(ORACLE_W_GRID)}
    ev = run.cached("evaluate", key, evaluate)
    soft, lin = results["softmax"], results["linear"]

    def per_unit(values) -> np.ndarray:
        """(..., C) -> (P, nL, ...) by selection: by value, not by position in the sweep."""
        return np.stack([np.stack([values(soft.select(function_class=c, L=L)) for L in Ls]) for c in classes])

    theory = []
    for d, ns_d in theory_dims(cfg):
        res = results[f"theory_d{d}"]
        Lu = [cfg["L_pretrain"][0], cfg["L_test"]]
        idx = np.array([[res.select(L=L, n=n) for n in ns_d] for L in Lu])       # (2, N, S)
        theory.append(TheoryAtD(d=d, n=ns_d, L_unit=Lu, L_prime=np.array(cfg["L_prime_factors"]) * cfg["L_test"],
                                error=ev[f"theory_d{d}"][idx], oracle=ev[f"theory_d{d}_oracle"],
                                w_signed=np.trace(res.M[idx], axis1=-2, axis2=-1) / d, sigma=cfg["sigma"]))
    trends = {name: loss_trend(r.loss_history) for name, r in results.items()}
    return GeneralizationAnalysis(
        classes=classes, L=Ls, n=ns, tests=tests, n_train=cfg["n_train"], L_test=cfg["L_test"],
        softmax=per_unit(lambda i: ev["softmax"][i]),
        linear=np.stack([ev["linear"][lin.select(function_class=c)] for c in classes]),
        oracle=ev["oracle"], oracle_w=ev["oracle_w"], zero=ev["zero"],
        M_norm=per_unit(lambda i: spectral_norm(soft.M[i])),
        M_norm_history=per_unit(lambda i: spectral_norm(soft.M_history[:, i])),
        log_steps=soft.log_steps,
        w_signed=per_unit(lambda i: np.trace(soft.M[i], axis1=-2, axis2=-1)) / cfg["d"],
        landscape=ev["landscape"], landscape_w=np.asarray(LANDSCAPE_W), theory=theory,
        curves=curves(run, soft, ev["oracle_w"]),
        loss_change={k: v[0] for k, v in trends.items()}, loss_change_se={k: v[1] for k, v in trends.items()})


def theory_tests(cfg: dict) -> list[dict]:
    """The test settings of the Theorem 3.5 sweep: the theorem's class at L' = factor x L_test."""
    return [dict(function_class=cfg["theory_class"], L=f * cfg["L_test"], sigma=cfg["sigma"])
            for f in cfg["L_prime_factors"]]


def curve_units(cfg: dict) -> list[tuple[str, float]]:
    """The units of the trajectory checks: every class at the test L (the matched units), and the mismatch class at
    every other pretraining L."""
    return ([(c, cfg["L_test"]) for c in cfg["pretrain_classes"]]
            + [(cfg["mismatch_class"], L) for L in cfg["L_pretrain"] if L != cfg["L_test"]])


def blocked_error(M, tests: list[dict], ns, spec: InputSpec, n_tasks: int, eval_seed: int, device) -> np.ndarray:
    """:func:`softmax_icl.metrics.icl_error_grid` of many softmax units (U, d, d) -> (U, R, N), in blocks of units
    that keep one call's weights within :data:`CURVE_ELEMENTS` (every block sees the same tasks: the same numbers
    as one call)."""
    M = np.asarray(M)
    block = max(1, int(CURVE_ELEMENTS // (len(tests) * MIN_CHUNK * (max(ns) + 1))))
    return np.concatenate([icl_error_grid("softmax", M[i:i + block], tests, ns, spec, n_tasks=n_tasks,
                                          eval_seed=eval_seed, device=device)[0] for i in range(0, len(M), block)])


def curves(run: Run, soft: SweepResult, oracle_w: np.ndarray) -> Curves:
    """The units of :func:`curve_units` at every logged step and seed, and the oracle's tuned bandwidths
    ``oracle_w`` (T, N), on the curve set: the first ``curve_tasks`` tasks of the evaluation set, at the test lengths
    n <= n_train. One stack of matrices (units x steps x seeds, then the oracle's windows) through
    :func:`blocked_error`."""
    cfg = run.cfg
    units = curve_units(cfg)
    ns = [n for n in cfg["n_test"] if n <= cfg["n_train"]]
    tests = [dict(function_class=c, L=cfg["L_test"], sigma=cfg["sigma"]) for c in cfg["pretrain_classes"]]
    idx = np.stack([soft.select(function_class=c, L=L) for c, L in units])             # (K, S)
    K, S = idx.shape
    T_log, d = len(soft.log_steps), cfg["d"]
    w = np.asarray(oracle_w)[:, :len(ns)]                                                # (T, Nc)
    used = np.unique(w)

    def compute():
        M = np.concatenate([soft.M_history[:, idx].transpose(1, 0, 2, 3, 4).reshape(-1, d, d),
                            nw_matrices(used, d)])
        err = blocked_error(M, tests, ns, InputSpec(d=d), cfg["curve_tasks"], cfg["eval_seed"], run.device)
        return {"units": err[:K * T_log * S].reshape(K, T_log, S, len(tests), len(ns)), "oracle": err[K * T_log * S:]}

    key = {"layout": 1, "train": soft.sweep, "units": units, "tests": tests, "n": ns,
           "curve_tasks": cfg["curve_tasks"], "eval_seed": cfg["eval_seed"], "oracle_w": used.tolist()}
    out = run.cached("evaluate_curves", key, compute)
    oracle = out["oracle"][np.searchsorted(used, w), np.arange(len(tests))[:, None], np.arange(len(ns))[None]]
    return Curves(units=units, steps=np.asarray(soft.log_steps), n=ns, error=out["units"], oracle=oracle)
