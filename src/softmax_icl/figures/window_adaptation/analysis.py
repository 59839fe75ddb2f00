"""Window adaptation: the windows and ICL errors of the pretrained units (Collins et al. 2024, Figure 1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...baselines import nadaraya_watson_oracle
from ...metrics import icl_error_grid, spectral_norm, window_halfwidth
from ...records import Run
from ...tasks import InputSpec
from ...training import SweepResult
from .sweeps import MODELS, Setting, families, settings, unit_index


@dataclass(frozen=True)
class WindowAnalysis:
    """Windows at ``n_window`` and ICL errors of every unit, per model (keys of the dicts: "softmax", "linear"), for
    the two task families (axis 0: the paper's family, then the zero-mean one)."""

    families: tuple               # (paper's class, zero-mean class)
    settings: list                # Setting per column
    n: list                       # context lengths
    halfwidth: dict               # model -> (family, setting, seed) half-width of the window, degrees
    w: dict                       # model -> (family, setting, seed) ||M||_2
    error: dict                   # model -> (family, setting, n, seed) ICL error
    oracle: np.ndarray            # (family, setting, n) best-bandwidth Nadaraya-Watson error
    oracle_w: np.ndarray          # (family, setting, n) its bandwidth
    fixed: np.ndarray             # (family, setting, n) error of the one bandwidth per n best over all settings
    fixed_w: np.ndarray           # (family, n) that bandwidth
    uniform: np.ndarray           # (family, setting, n) error of M = 0: the uniform average of the context labels
    halfwidth_init: np.ndarray    # (family, setting, seed) softmax half-width at initialisation (degrees)

    def mean_error(self, model: str) -> np.ndarray:
        """(family, setting, n): seed-mean ICL error of a trained model, the softmax units at their initialisation
        ("untrained"), or a baseline ("oracle", "fixed", "uniform")."""
        if model in ("oracle", "fixed", "uniform"):
            return getattr(self, model)
        return self.error[model].mean(-1)

    def ratio(self, num: str, den: str) -> np.ndarray:
        """(family, setting, n): seed-mean ICL error of ``num`` over ``den`` (see :meth:`mean_error`)."""
        return self.mean_error(num) / self.mean_error(den)

    def window_helps(self) -> np.ndarray:
        """(family, setting, n): cells where a window has something to adapt to -- the tuned Nadaraya-Watson
        estimator's error is at most half the uniform average's (elsewhere every window is near the task variance)."""
        return self.oracle <= 0.5 * self.uniform


def analyse(run: Run, results: dict[str, SweepResult]) -> WindowAnalysis:
    """Windows, ICL errors (trained units and the Nadaraya-Watson oracle) per family, setting and n."""
    cfg = run.cfg
    spec = InputSpec(d=cfg["d"])
    sets, ns, fams = settings(cfg), cfg["n_values"], families(cfg)

    def per_family(fn):
        return np.stack([np.stack([fn(f, s) for s in sets]) for f in fams])

    # attention window half-width (degrees) and ||M|| of every unit at n_window: (family, setting, seed)
    at_nw = lambda m, f, s: results[m].M[unit_index(results[m], s, cfg["n_window"], f)]  # noqa: E731
    halfwidth = {m: per_family(lambda f, s: np.degrees(window_halfwidth(m, at_nw(m, f, s)))) for m in MODELS}
    init = results["softmax"].M_history[0]
    halfwidth_init = per_family(lambda f, s: np.degrees(window_halfwidth(
        "softmax", init[unit_index(results["softmax"], s, cfg["n_window"], f)])))
    w = {m: per_family(lambda f, s: spectral_norm(at_nw(m, f, s))) for m in MODELS}

    def evaluate():
        err = {}
        tests = [dict(function_class=f, L=s.L, sigma=s.sigma) for f in fams for s in sets]
        kw = dict(n_tasks=cfg["eval_tasks"], eval_seed=cfg["eval_seed"], device=run.device)
        # every unit on every family, setting and n in one pass (same tasks as the oracle); keep its own; the softmax
        # units also at their initialisation (the untrained baseline)
        for m, res, M in [(m, results[m], results[m].M) for m in MODELS] + [("untrained", results["softmax"], init)]:
            e, _ = icl_error_grid("softmax" if m == "untrained" else m, M, tests, ns, spec, **kw)  # (unit, test, n)
            err[m] = np.stack([np.stack([np.stack([e[unit_index(res, s, n, f), k * len(sets) + i, j]
                                                   for j, n in enumerate(ns)]) for i, s in enumerate(sets)])
                               for k, f in enumerate(fams)])                               # (family, setting, n, seed)
        shape = (len(fams), len(sets), len(ns))
        err["uniform"] = icl_error_grid("softmax", np.zeros((1, spec.d, spec.d)), tests, ns, spec, **kw)[0][0]
        ow, oe, _, fw, fe = nadaraya_watson_oracle(
            tests, ns, spec, n_tune=min(4096, cfg["eval_tasks"]), n_eval=cfg["eval_tasks"],
            tune_seed=cfg["eval_seed"] + 100, eval_seed=cfg["eval_seed"], device=run.device, shared=True)
        err["oracle_w"], err["oracle"], err["fixed"], err["uniform"] = (
            v.reshape(shape) for v in (ow, oe, fe, err["uniform"]))
        err["fixed_w"] = np.broadcast_to(fw, (len(fams), len(ns))).copy()
        return err

    key = {"layout": 5, "train": {m: results[m].sweep for m in MODELS}, "eval_tasks": cfg["eval_tasks"],
           "eval_seed": cfg["eval_seed"]}
    ev = run.cached("evaluate", key, evaluate)
    return WindowAnalysis(families=fams, settings=sets, n=ns, halfwidth=halfwidth, w=w,
                          error={m: ev[m] for m in (*MODELS, "untrained")}, oracle=ev["oracle"],
                          oracle_w=ev["oracle_w"], fixed=ev["fixed"], fixed_w=ev["fixed_w"], uniform=ev["uniform"],
                          halfwidth_init=halfwidth_init)


__all__ = ["Setting", "WindowAnalysis", "analyse"]
