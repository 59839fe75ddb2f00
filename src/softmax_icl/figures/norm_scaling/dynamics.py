"""Figure 3's dynamics: how fast ||M||_2 grows during pretraining, per L, from a small init with a small Adam step.

The paper's optimiser and learning rate are not in the sources at hand. The main sweeps use Adam at lr 0.1, where
every norm reaches its final value within a few dozen steps, so growth cannot be compared there; these sweeps start
from a smaller init (``dyn_init``) with a smaller step (``dyn_lr``) and log densely.

Growth rate of a unit: the least-squares slope of log ||M||_2 against the step over the first ``dyn_early`` of
training (all units start from the same init scale). Its control: the same slope over the last quarter of training,
after the norms have settled, where no ordering with L is expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...metrics import spectral_norm
from ...training import Grid, SweepResult

LATE_FRACTION = 0.25


@dataclass(frozen=True)
class Growth:
    """Growth statistics of one dynamics sweep (one input distribution); arrays over its configurations."""

    setting: str
    configs: list
    grid: Grid                   # the sweep's grid, by which its units are selected
    steps: np.ndarray
    norm_history: np.ndarray     # (T, C)
    early_slope: np.ndarray      # d log ||M|| / d step over the first dyn_early of training
    late_slope: np.ndarray       # the same over the last LATE_FRACTION (control)
    t_half: np.ndarray           # first logged step with ||M|| >= half its final value
    final_norm: np.ndarray


def _slope(steps: np.ndarray, logn: np.ndarray, mask: np.ndarray) -> np.ndarray:
    t = steps[mask].astype(np.float64)
    y = logn[mask]
    tc = t - t.mean()
    return (tc[:, None] * (y - y.mean(0))).sum(0) / (tc**2).sum()


def growth(res: SweepResult, setting: str, early: float) -> Growth:
    steps = np.asarray(res.log_steps)
    H = spectral_norm(res.M_history)                                  # (T, C)
    logn = np.log(H)
    T = steps[-1]
    early_mask = steps <= early * T
    late_mask = steps >= (1 - LATE_FRACTION) * T
    final = H[late_mask].mean(0)
    reached = H >= 0.5 * final[None, :]
    t_half = np.where(reached.any(0), steps[reached.argmax(0)], np.nan)
    return Growth(setting, res.configs, res.grid, steps, H, _slope(steps, logn, early_mask),
                  _slope(steps, logn, late_mask), t_half.astype(np.float64), final)


@dataclass(frozen=True)
class Ordering:
    """Does a statistic increase along the L grid? Per (class, seed): the smallest difference between consecutive
    L; the verdict is over every panel and seed (the worst one)."""

    L: np.ndarray
    by_panel: dict               # (setting, class) -> (seeds, len(L)) statistic
    worst_step: float            # min over panels, seeds, consecutive L of stat(L_k+1) - stat(L_k)
    worst_where: str


def ordering(growths: list[Growth], classes: list[str], Ls: list[float], stat: str) -> Ordering:
    by_panel, worst, where = {}, math.inf, ""
    for g in growths:
        seeds = list(range(g.grid.seeds))
        for cls in classes:
            tab = np.full((len(seeds), len(Ls)), np.nan)
            for j, L in enumerate(Ls):
                tab[:, j] = getattr(g, stat)[g.grid.units(function_class=cls, L=L)]      # one unit per seed
            by_panel[(g.setting, cls)] = tab
            diffs = np.diff(tab, axis=1)
            k = np.unravel_index(np.nanargmin(diffs), diffs.shape)
            if diffs[k] < worst:
                worst = float(diffs[k])
                where = f"{cls}, {g.setting}, seed {seeds[k[0]]}, L = {Ls[k[1]]:g} -> {Ls[k[1] + 1]:g}"
    return Ordering(np.array(Ls), by_panel, worst, where)


def mean_ordering(o: Ordering, L_max: dict) -> tuple[float, str, list]:
    """The ordering of the seed-mean statistic along the L grid of each panel, up to ``L_max[(setting, class)]``
    (inclusive; panels with fewer than two L in range are left out). Returns the smallest difference between
    consecutive L over the panels in range, where it is, and the panels used as ``setting/class <= L``."""
    worst, where, used = math.inf, "", []
    for (setting, cls), tab in o.by_panel.items():
        keep = o.L <= L_max[(setting, cls)] * (1 + 1e-9)
        if keep.sum() < 2:
            continue
        used.append(f"{cls}/{setting} up to L = {o.L[keep][-1]:g}")
        diffs = np.diff(np.nanmean(tab[:, keep], axis=0))
        k = int(np.argmin(diffs))
        if diffs[k] < worst:
            worst, where = float(diffs[k]), f"{cls}, {setting}, L = {o.L[keep][k]:g} -> {o.L[keep][k + 1]:g}"
    return worst, where, used
