"""Generalisation: every pretrained unit tested on every class and context length (Figure 5, Theorem 3.5).

Every unit is tested on every class at the test L and at every test context length. The errors at all test
context lengths come from one pass over the evaluation set (:func:`softmax_icl.metrics.icl_error_grid`): the
context is drawn at the largest n, every shorter context is a prefix, and the scores of every unit are computed
once and shared by all test classes and context lengths. These are the tasks :func:`softmax_icl.metrics.icl_error`
draws with the same seed at n = max(n_test) (a test checks the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...baselines import nadaraya_watson_oracle
from ...metrics import icl_error_grid, spectral_norm
from ...records import Run
from ...tasks import InputSpec
from ...training import SweepResult
from .sweeps import MODELS

#: Nadaraya-Watson bandwidths M = w I scanned for the oracle (tuned per test class and n).
ORACLE_W_GRID = tuple(np.round(np.geomspace(0.1, 1000.0, 24), 6))
#: Signed bandwidths M = w I along which the pretraining loss of the mismatch class is scanned.
LANDSCAPE_W = tuple(np.round(np.concatenate([-np.geomspace(100.0, 0.1, 13), [0.0], np.geomspace(0.1, 1000.0, 17)]), 6))


def loglog_slope(ns, err) -> np.ndarray:
    """Least-squares slope of log(err) against log(n) along the last axis."""
    x = np.log(np.asarray(ns, dtype=np.float64))
    y = np.log(np.asarray(err, dtype=np.float64))
    xc = x - x.mean()
    return ((y - y.mean(-1, keepdims=True)) * xc).sum(-1) / (xc**2).sum()


def index_of(seq, v) -> int:
    """Position of ``v`` in ``seq``: the nearest number, or the exact string."""
    return int(np.argmin([abs(float(x) - float(v)) for x in seq])) if not isinstance(v, str) else list(seq).index(v)


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
    M_norm: np.ndarray            # (P, nL, S) ||M||_2 of every softmax unit
    M_norm_history: np.ndarray    # (P, nL, T_log, S)
    log_steps: np.ndarray         # (T_log,)
    w_signed: np.ndarray          # (P, nL, S) tr(M) / d: negative = the unit attends away from the query
    landscape: np.ndarray         # (nL, W) pretraining loss of the mismatch class along M = w I
    landscape_w: np.ndarray       # (W,)


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
        for m in MODELS:
            out[m], out[f"{m}_se"] = icl_error_grid(m, results[m].M, tests, ns, n_tasks=cfg["eval_tasks"],
                                                 eval_seed=cfg["eval_seed"], **kw)
        out["oracle_w"], out["oracle"], _ = nadaraya_watson_oracle(
            tests, ns, spec, w_grid, n_tune=min(4096, cfg["eval_tasks"]), n_eval=cfg["eval_tasks"],
            tune_seed=cfg["eval_seed"] + 100, eval_seed=cfg["eval_seed"], device=run.device)
        # the pretraining objective of the mismatch class along M = w I (w of either sign), at every pretraining L
        pre = [dict(function_class=cfg["mismatch_class"], L=L, sigma=cfg["sigma"]) for L in Ls]
        land, _ = icl_error_grid("softmax", np.asarray(LANDSCAPE_W)[:, None, None] * np.eye(cfg["d"]), pre,
                              [cfg["n_train"]], n_tasks=min(4096, cfg["eval_tasks"]), eval_seed=cfg["eval_seed"] + 200,
                              **kw)
        out["landscape"] = land[..., 0].T                                         # (nL, W)
        return out

    key = {"layout": 3, "train": {m: results[m].sweep for m in MODELS}, "tests": tests, "n_test": ns,
           "eval_tasks": cfg["eval_tasks"], "eval_seed": cfg["eval_seed"], "w_grid": list(ORACLE_W_GRID)}
    ev = run.cached("evaluate", key, evaluate)
    soft, lin = results["softmax"], results["linear"]

    def per_unit(values) -> np.ndarray:
        """(..., C) -> (P, nL, ...) by selection: by value, not by position in the sweep."""
        return np.stack([np.stack([values(soft.select(function_class=c, L=L)) for L in Ls]) for c in classes])

    return GeneralizationAnalysis(
        classes=classes, L=Ls, n=ns, tests=tests, n_train=cfg["n_train"], L_test=cfg["L_test"],
        softmax=per_unit(lambda i: ev["softmax"][i]),
        linear=np.stack([ev["linear"][lin.select(function_class=c)] for c in classes]),
        oracle=ev["oracle"], oracle_w=ev["oracle_w"],
        M_norm=per_unit(lambda i: spectral_norm(soft.M[i])),
        M_norm_history=per_unit(lambda i: spectral_norm(soft.M_history[:, i])),
        log_steps=soft.log_steps,
        w_signed=per_unit(lambda i: np.trace(soft.M[i], axis1=-2, axis2=-1)) / cfg["d"],
        landscape=ev["landscape"], landscape_w=np.asarray(LANDSCAPE_W))
