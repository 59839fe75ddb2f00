"""Theorem 3.4 across n and d: the population-optimal window of the ReLU class, its local exponent and the
noise term, from batched Monte Carlo scans (no training), and the trained units at the largest n.

For the ReLU class ``f`` scales with ``L``, so at one ``(d, n)`` the loss over ``M = w I`` is
``L^2 [bias_1(w) + (n / s) noise(w)]`` with ``s = n L^2 / sigma^2``: one scan of ``bias_1`` and ``noise`` over the
``w`` grid gives the optimal ``w*(s)`` for every ``s``. The theorem is a statement "for sufficiently large n" at
fixed ``L`` and ``sigma``, so the exponent is read where the theorem puts it: the local exponent
``d log w* / d log s`` at ``s = n rho`` for fixed ``rho = L^2 / sigma^2``, as ``n`` grows, for every ``d``. No
regime cut-off enters it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import theory as th
from ...book.run import Run
from ...training import SweepResult
from .analysis import final_M

S_GRID = np.geomspace(1.0, 1e9, 361)        # s = n L^2 / sigma^2 of the population curves
SLOPE_HALF_WIDTH = 0.25 * math.log(10)      # local exponent: least-squares slope over +-1/4 decade of s
NOISE_FIT_W = (30.0, 300.0)                 # w range of the noise-term exponent (closed form, n -> inf)
NEFF_MIN = 100.0                            # MC check of the closed form where 1 / E[sum a^2] >= this


@dataclass(frozen=True)
class ExponentCurve:
    """Population optimum of one (d, n): w*(s), its local exponent, and the noiseless saturation level."""

    d: int
    n: int
    s: np.ndarray
    w: np.ndarray
    slope: np.ndarray
    w_sat: float


@dataclass(frozen=True)
class NoiseTerm:
    """n E[sum_i a_i^2] against w for one d: Monte Carlo at the largest n and the n -> inf closed form."""

    d: int
    n: int
    w: np.ndarray
    mc: np.ndarray              # n * noise at the largest n (MC)
    limit: np.ndarray           # closed form, n -> inf
    exponent: float             # closed form's fitted exponent over NOISE_FIT_W
    exponent_mc: float          # MC's fitted exponent over NOISE_FIT_W, inside n_eff >= NEFF_MIN (nan if < 3 pts)
    mc_max_rel_dev: float       # largest |MC / closed form - 1| where n_eff >= NEFF_MIN


@dataclass(frozen=True)
class Theorem34:
    ds: tuple
    ns: tuple
    rhos: tuple
    rho_check: float
    scans: dict                 # d -> th.WindowScan
    curves: dict                # (d, n) -> ExponentCurve
    exponent: dict              # (d, n, rho) -> local exponent at s = n rho
    noise: dict                 # d -> NoiseTerm


def w_grid(cfg: dict) -> np.ndarray:
    return np.geomspace(cfg["t34_w_min"], cfg["t34_w_max"], cfg["t34_points"])


def exponent_at(curve: ExponentCurve, s: float) -> float:
    """The local exponent of one population curve at ``s`` (interpolated in log s)."""
    return float(np.interp(math.log(s), np.log(curve.s), curve.slope))


def w_star_at(curve: ExponentCurve, s) -> np.ndarray:
    return np.exp(np.interp(np.log(s), np.log(curve.s), np.log(curve.w)))


def scans(run: Run) -> dict:
    """One batched scan per d over all n of ``t34_n`` and all w (cached)."""
    cfg = run.cfg
    wg = w_grid(cfg)
    key = {"d": cfg["t34_d"], "n": cfg["t34_n"], "w": wg.tolist(), "tasks": cfg["t34_tasks"],
           "seed": cfg["eval_seed"] + 400}

    def compute():
        return {d: th.relu_window_scan(d, cfg["t34_n"], wg, cfg["t34_tasks"], seed=cfg["eval_seed"] + 400 + d)
                for d in cfg["t34_d"]}

    return run.cached("theorem34_scan", key, compute)


def analyse(run: Run) -> Theorem34:
    cfg = run.cfg
    sc = scans(run)
    rho_check = (cfg["L_sigma"] / cfg["sigma"]) ** 2
    rhos = tuple(sorted(set(cfg["t34_rho"]) | {rho_check}))
    curves, expo, noise = {}, {}, {}
    for d, s in sc.items():
        for k, n in enumerate(s.ns):
            w_star = th.optimal_w_curve(s.w, s.bias[k], s.noise[k], S_GRID, n)
            c = ExponentCurve(d, n, S_GRID, w_star, th.local_slopes(S_GRID, w_star, SLOPE_HALF_WIDTH),
                              float(th.saturation_w(s.w, s.bias[k])))
            curves[(d, n)] = c
            for rho in rhos:
                expo[(d, n, rho)] = exponent_at(c, n * rho)
        n_max = s.ns[-1]
        mc = n_max * s.noise[-1]
        limit = th.sphere_noise_limit(d, s.w)
        ok = (1.0 / s.noise[-1] >= NEFF_MIN)
        dev = float(np.max(np.abs(mc[ok] / limit[ok] - 1))) if ok.any() else float("nan")
        wl = np.geomspace(*NOISE_FIT_W, 25)
        k_lim = th.noise_exponent_fit(wl, th.sphere_noise_limit(d, wl), *NOISE_FIT_W).slope
        m = ok & (s.w >= NOISE_FIT_W[0]) & (s.w <= NOISE_FIT_W[1])
        k_mc = th.fit_loglog(s.w[m], mc[m]).slope if m.sum() >= 3 else float("nan")
        noise[d] = NoiseTerm(d, n_max, s.w, mc, limit, float(k_lim), float(k_mc), dev)
    return Theorem34(tuple(cfg["t34_d"]), tuple(cfg["t34_n"]), rhos, rho_check, sc, curves, expo, noise)


# -- trained units at the largest n the profile affords -------------------------------------------------

@dataclass(frozen=True)
class TrainedLargeN:
    """Trained ReLU units at n = t34_train_n for every d, against the population curve of their own (d, n, s)."""

    configs: list
    d: np.ndarray
    w: np.ndarray               # best multiple of I of the final M
    resid: np.ndarray           # ||M - w I||_F / ||M||_F
    w_pop: np.ndarray           # population optimum at the unit's own (d, n, s)
    w_pop_other: np.ndarray     # control: the population optimum of the other L of the sweep (same d, n, sigma)


def trained_large_n(cfg: dict, res: dict[str, SweepResult], t34: Theorem34) -> TrainedLargeN:
    configs, ds, ws, rs, wp, wo = [], [], [], [], [], []
    Ls = cfg["t34_train_L"]
    for d in cfg["t34_d"]:
        r = res[f"t34_d{d}"]
        M = final_M(r, cfg["average_last"])
        w, resid = th.best_multiple(M, np.eye(d))
        curve = t34.curves[(d, cfg["t34_train_n"])]
        for c, wi, ri in zip(r.configs, w, resid):
            other = Ls[(Ls.index(c["L"]) + 1) % len(Ls)]
            configs.append(c)
            ds.append(d)
            ws.append(wi)
            rs.append(ri)
            wp.append(float(w_star_at(curve, th.snr(c["n"], c["L"], c["sigma"]))))
            wo.append(float(w_star_at(curve, th.snr(c["n"], other, c["sigma"]))))
    return TrainedLargeN(configs, np.array(ds), np.array(ws), np.array(rs), np.array(wp), np.array(wo))
