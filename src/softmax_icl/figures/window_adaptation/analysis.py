"""Window adaptation: the windows and ICL errors of the pretrained units (Collins et al. 2024, Figure 1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...baselines import nadaraya_watson_oracle
from ...metrics import icl_error_grid, spectral_norm, window_halfwidth
from ...records import Run
from ...tasks import InputSpec
from ...training import SweepResult
from .sweeps import MODELS, Setting, settings, unit_index


@dataclass(frozen=True)
class WindowAnalysis:
    """Windows at ``n_window`` and ICL errors of every unit, per model (keys of the dicts: "softmax", "linear")."""

    settings: list                # Setting per column
    n: list                       # context lengths
    halfwidth: dict               # model -> (setting, seed) half-width of the window, degrees
    w: dict                       # model -> (setting, seed) ||M||_2
    error: dict                   # model -> (setting, n, seed) ICL error; "oracle" -> (setting, n); "oracle_w"


def analyse(run: Run, results: dict[str, SweepResult]) -> WindowAnalysis:
    """Windows, ICL errors (trained units and the Nadaraya-Watson oracle) per setting and n."""
    cfg = run.cfg
    spec = InputSpec(d=cfg["d"])
    sets, ns = settings(cfg), cfg["n_values"]
    # attention window half-width (degrees) of every unit at n_window: (model, setting, seed)
    halfwidth = {m: np.stack([np.degrees(window_halfwidth(m, results[m].M[unit_index(results[m], s, cfg["n_window"])]))
                              for s in sets]) for m in MODELS}
    w = {m: np.stack([spectral_norm(results[m].M[unit_index(results[m], s, cfg["n_window"])]) for s in sets])
         for m in MODELS}

    def evaluate():
        err = {}
        tests = [dict(function_class=cfg["function_class"], L=s.L, sigma=s.sigma) for s in sets]
        for m in MODELS:
            # every unit on every setting and n in one pass (same tasks as the oracle); keep its own setting and n
            res = results[m]
            e, _ = icl_error_grid(m, res.M, tests, ns, spec, n_tasks=cfg["eval_tasks"], eval_seed=cfg["eval_seed"],
                                  device=run.device)                                       # (unit, setting, n)
            err[m] = np.stack([np.stack([e[unit_index(res, s, n), i, j] for j, n in enumerate(ns)])
                               for i, s in enumerate(sets)])                               # (setting, n, seed)
        err["oracle_w"], err["oracle"], _ = nadaraya_watson_oracle(
            tests, ns, spec, n_tune=min(4096, cfg["eval_tasks"]), n_eval=cfg["eval_tasks"],
            tune_seed=cfg["eval_seed"] + 100, eval_seed=cfg["eval_seed"], device=run.device)
        return err

    key = {"layout": 3, "train": {m: results[m].sweep for m in MODELS}, "eval_tasks": cfg["eval_tasks"], "eval_seed": cfg["eval_seed"]}
    return WindowAnalysis(settings=sets, n=ns, halfwidth=halfwidth, w=w, error=run.cached("evaluate", key, evaluate))


__all__ = ["Setting", "WindowAnalysis", "analyse"]
