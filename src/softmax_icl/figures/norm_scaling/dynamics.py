"""Figure 3's dynamics: how fast ||M||_2 grows during pretraining, per L, from a small init with a small Adam step.

The paper's optimiser and learning rate are not in the sources at hand. The main sweeps use Adam at lr 0.1, where
every norm reaches its final value within a few dozen steps, so growth cannot be compared there; these sweeps start
from a smaller init (``dyn_init``) with a smaller step (``dyn_lr``) and log densely.

How much a unit has grown during pretraining: its *gain*, the mean over the logged steps after the first of
log(||M(t)||_2 / ||M(0)||_2), the area under Figure 3's curve on a log scale. Between two L the difference of gains is
the time-averaged log ratio of their norms: "grows faster" is "has grown more after the same number of steps". The
early slope of log ||M|| (over the first ``dyn_early`` of training) is shown beside it but decides nothing: under
Adam, whose steps do not depend on the gradient's scale, a unit of larger L (whose early gradient is mostly the same
direction, larger) starts along the same path as a unit of smaller L and grows faster only by growing for longer, so
an early slope cannot see the difference (tests/test_norm_scaling.py plants both cases). The rival: the gain over the
last quarter of training alone (relative to the norm at its start), after the norms have settled.
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
    gain: np.ndarray             # mean over the logged steps t > 0 of log(||M(t)|| / ||M(0)||): the decided statistic
    gain_history: np.ndarray     # (T - 1, C): the same had training stopped at each logged step t > 0
    late_gain: np.ndarray        # the same over the last LATE_FRACTION, relative to the norm where it starts (rival)


def gains(steps: np.ndarray, H: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gain, its history at every logged step after the first, late gain) of norm histories ``H`` (T, C) logged at
    ``steps`` (see the module docstring)."""
    logn = np.log(np.asarray(H, dtype=np.float64))
    up = logn[1:] - logn[:1]                                          # (T - 1, C)
    history = np.cumsum(up, axis=0) / np.arange(1, len(up) + 1)[:, None]
    k0 = int(np.nonzero(steps >= (1 - LATE_FRACTION) * steps[-1])[0][0])
    late = (logn[k0 + 1:] - logn[k0]).mean(0) if k0 + 1 < len(steps) else np.zeros(H.shape[1])
    return history[-1], history, late


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
                  _slope(steps, logn, late_mask), t_half.astype(np.float64), final, *gains(steps, H))


@dataclass(frozen=True)
class Ordering:
    """Does a statistic increase along the L grid? Per (class, seed): the smallest difference between consecutive
    L; the verdict is over every panel and seed (the worst one)."""

    L: np.ndarray
    by_panel: dict               # (setting, class) -> (seeds, len(L)) statistic
    worst_step: float            # min over panels, seeds, consecutive L of stat(L_k+1) - stat(L_k)
    worst_where: str
    history: dict | None = None  # (setting, class) -> (T', seeds, len(L)) the statistic along training, if logged
    steps: np.ndarray | None = None  # its logged steps


def ordering(growths: list[Growth], classes: list[str], Ls: list[float], stat: str) -> Ordering:
    by_panel, worst, where, history, steps = {}, math.inf, "", {}, None
    for g in growths:
        seeds = list(range(g.grid.seeds))
        logged = getattr(g, stat + "_history", None)
        for cls in classes:
            tab = np.full((len(seeds), len(Ls)), np.nan)
            for j, L in enumerate(Ls):
                tab[:, j] = getattr(g, stat)[g.grid.units(function_class=cls, L=L)]      # one unit per seed
            by_panel[(g.setting, cls)] = tab
            if logged is not None:
                history[(g.setting, cls)] = np.stack([logged[:, g.grid.units(function_class=cls, L=L)]
                                                      for L in Ls], axis=-1)            # (T', seeds, L)
                steps = np.asarray(g.steps[1:], dtype=np.float64)
            diffs = np.diff(tab, axis=1)
            k = np.unravel_index(np.nanargmin(diffs), diffs.shape)
            if diffs[k] < worst:
                worst = float(diffs[k])
                where = f"{cls}, {g.setting}, seed {seeds[k[0]]}, L = {Ls[k[1]]:g} -> {Ls[k[1] + 1]:g}"
    return Ordering(np.array(Ls), by_panel, worst, where, history or None, steps)


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
