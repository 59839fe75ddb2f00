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

    def ratio(self, num: str, den: str) -> np.ndarray:
        """(family, setting, n): seed-mean ICL error of model ``num`` over model ``den`` (or "oracle")."""
        top = self.error[num].mean(-1)
        return top / (self.oracle if den == "oracle" else self.error[den].mean(-1))


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
    w = {m: per_family(lambda f, s: spectral_norm(at_nw(m, f, s))) for m in MODELS}

    def evaluate():
        err = {}
        tests = [dict(function_class=f, L=s.L, sigma=s.sigma) for f in fams for s in sets]
        for m in MODELS:
            # every unit on every family, setting and n in one pass (same tasks as the oracle); keep its own
            res = results[m]
            e, _ = icl_error_grid(m, res.M, tests, ns, spec, n_tasks=cfg["eval_tasks"], eval_seed=cfg["eval_seed"],
                                  device=run.device)                                       # (unit, test, n)
            err[m] = np.stack([np.stack([np.stack([e[unit_index(res, s, n, f), k * len(sets) + i, j]
                                                   for j, n in enumerate(ns)]) for i, s in enumerate(sets)])
                               for k, f in enumerate(fams)])                               # (family, setting, n, seed)
        ow, oe, _ = nadaraya_watson_oracle(
            tests, ns, spec, n_tune=min(4096, cfg["eval_tasks"]), n_eval=cfg["eval_tasks"],
            tune_seed=cfg["eval_seed"] + 100, eval_seed=cfg["eval_seed"], device=run.device)
        err["oracle_w"], err["oracle"] = (v.reshape(len(fams), len(sets), len(ns)) for v in (ow, oe))
        return err

    key = {"layout": 4, "train": {m: results[m].sweep for m in MODELS}, "eval_tasks": cfg["eval_tasks"],
           "eval_seed": cfg["eval_seed"]}
    ev = run.cached("evaluate", key, evaluate)
    return WindowAnalysis(families=fams, settings=sets, n=ns, halfwidth=halfwidth, w=w,
                          error={m: ev[m] for m in MODELS}, oracle=ev["oracle"], oracle_w=ev["oracle_w"])


__all__ = ["Setting", "WindowAnalysis", "analyse"]
