"""Theorem 3.4 across n and d: the population-optimal window of the ReLU class, its local exponent and the
noise term, from batched Monte Carlo scans (no training), and the trained units at the largest n.

For the ReLU class ``f`` scales with ``L``, so at one ``(d, n)`` the loss over ``M = w I`` is
``L^2 [bias_1(w) + (n / s) noise(w)]`` with ``s = n L^2 / sigma^2``: one scan of ``bias_1`` and ``noise`` over the
``w`` grid gives the optimal ``w*(s)`` for every ``s``. The theorem is a statement "for sufficiently large n" at
fixed ``L`` and ``sigma``, so the exponent is read where the theorem puts it: the local exponent
``d log w*/d log s`` at ``s = n rho`` for fixed ``rho = L^2 / sigma^2``, as ``n`` grows, for every ``d``. No
regime cut-off enters it.

The scan of each ``d`` runs as ``t34_batches`` independent batches of its ``t34_tasks`` tasks (its own draws each).
The terms are the task-weighted means over the batches; the Monte Carlo standard error of any quantity computed
from them (the exponent, its distance to a range edge) is the delete-one-batch jackknife over the batches:
``se^2 = (B - 1)/B sum_b (q_(-b) - mean_b q_(-b))^2``, ``q_(-b)`` the quantity from the other ``B - 1`` batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import theory as th
from ...base import derive_seed
from ...book.run import Run
from ...training import SweepResult
from .analysis import final_M, running_final

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
    scans: dict                 # d -> th.WindowScan (the batches pooled)
    curves: dict                # (d, n) -> ExponentCurve
    exponent: dict              # (d, n, rho) -> local exponent at s = n rho
    noise: dict                 # d -> NoiseTerm
    exponent_jack: dict         # (d, n, rho) -> (B,) the exponent from the scan without each batch (jackknife)

    def L_over_sigma(self) -> np.ndarray:
        """The grid of L/sigma the exponent tables read (sqrt of ``rhos``)."""
        return np.sqrt(np.asarray(self.rhos, dtype=np.float64))

    def w_star(self, d: int, n: int) -> np.ndarray:
        """The population optimum w* at (d, n) along the L/sigma grid (s = n rho for every rho of ``rhos``)."""
        return w_star_at(self.curves[(d, n)], n * np.asarray(self.rhos, dtype=np.float64))


def jackknife_se(reps) -> float:
    """Delete-one-batch jackknife standard error from the ``B`` leave-one-batch-out values ``reps`` (B,)."""
    r = np.asarray(reps, dtype=np.float64)
    return float(np.sqrt((r.size - 1) / r.size * ((r - r.mean()) ** 2).sum()))


def edge_distance(e, lo_hi: tuple[float, float]):
    """Distance of the exponent(s) ``e`` to the nearer edge of the range ``[lo, hi]`` (negative: outside)."""
    e = np.asarray(e, dtype=np.float64)
    return np.minimum(e - lo_hi[0], lo_hi[1] - e)


def w_grid(cfg: dict) -> np.ndarray:
    return np.geomspace(cfg["t34_w_min"], cfg["t34_w_max"], cfg["t34_points"])


def exponent_at(curve: ExponentCurve, s: float) -> float:
    """The local exponent of one population curve at ``s`` (interpolated in log s)."""
    return float(np.interp(math.log(s), np.log(curve.s), curve.slope))


def w_star_at(curve: ExponentCurve, s) -> np.ndarray:
    return np.exp(np.interp(np.log(s), np.log(curve.s), np.log(curve.w)))


def batch_sizes(total: int, batches: int) -> list[int]:
    """``total`` tasks split into ``batches`` batches as evenly as possible."""
    return [total // batches + (1 if b < total % batches else 0) for b in range(batches)]


def scans(run: Run) -> dict:
    """The scans of every d of ``t34_d`` over all n of ``t34_n`` and all w, each d as ``t34_batches`` independent
    batches (cached): d -> list of th.WindowScan, one per batch."""
    cfg = run.cfg
    wg = w_grid(cfg)
    sizes = batch_sizes(cfg["t34_tasks"], cfg["t34_batches"])
    key = {"d": cfg["t34_d"], "n": cfg["t34_n"], "w": wg.tolist(), "tasks": cfg["t34_tasks"],
           "seed": cfg["eval_seed"] + 400, "batches": cfg["t34_batches"]}

    def compute():
        return {d: [th.relu_window_scan(d, cfg["t34_n"], wg, m, seed=derive_seed(cfg["eval_seed"] + 400 + d, b),
                                        desc=f"Theorem 3.4 scan, d = {d}, batch {b + 1}/{len(sizes)}")
                    for b, m in enumerate(sizes)] for d in cfg["t34_d"]}

    return run.cached("theorem34_scan", key, compute)


def pooled(batches: list) -> th.WindowScan:
    """The batches of one d as one scan: task-weighted means; standard errors from the spread of the batch means."""
    m = np.array([b.n_tasks for b in batches], dtype=np.float64)
    mean = lambda k: np.tensordot(m / m.sum(), np.stack([getattr(b, k) for b in batches]), 1)  # noqa: E731
    se = lambda k: np.stack([getattr(b, k) for b in batches]).std(0, ddof=1) / np.sqrt(len(batches))  # noqa: E731
    b0 = batches[0]
    return th.WindowScan(b0.d, b0.ns, b0.w, mean("bias"), mean("noise"), se("bias"), se("noise"), int(m.sum()))


def _leave_one_out(batches: list) -> list[tuple[np.ndarray, np.ndarray]]:
    """(bias, noise) of the scan without each batch in turn (the jackknife's replicates)."""
    m = np.array([b.n_tasks for b in batches], dtype=np.float64)
    B = np.stack([b.bias for b in batches]) * m[:, None, None]
    V = np.stack([b.noise for b in batches]) * m[:, None, None]
    return [((B.sum(0) - B[k]) / (m.sum() - m[k]), (V.sum(0) - V[k]) / (m.sum() - m[k])) for k in range(len(m))]


def _curve(d: int, n: int, w: np.ndarray, bias: np.ndarray, noise: np.ndarray) -> ExponentCurve:
    w_star = th.optimal_w_curve(w, bias, noise, S_GRID, n)
    return ExponentCurve(d, n, S_GRID, w_star, th.local_slopes(S_GRID, w_star, SLOPE_HALF_WIDTH),
                         float(th.saturation_w(w, bias)))


def analyse(run: Run) -> Theorem34:
    cfg = run.cfg
    sc = scans(run)
    rho_check = (cfg["L_sigma"] / cfg["sigma"]) ** 2
    rhos = tuple(sorted(set(cfg["t34_rho"]) | {rho_check}))
    curves, expo, jack, noise, pooled_scans = {}, {}, {}, {}, {}
    for d, batches in sc.items():
        s = pooled_scans[d] = pooled(batches)
        loo = _leave_one_out(batches)
        for k, n in enumerate(s.ns):
            c = curves[(d, n)] = _curve(d, n, s.w, s.bias[k], s.noise[k])
            reps = [_curve(d, n, s.w, b[k], v[k]) for b, v in loo]
            for rho in rhos:
                expo[(d, n, rho)] = exponent_at(c, n * rho)
                jack[(d, n, rho)] = np.array([exponent_at(r, n * rho) for r in reps])
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
    return Theorem34(tuple(cfg["t34_d"]), tuple(cfg["t34_n"]), rhos, rho_check, pooled_scans, curves, expo, noise,
                     jack)


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
    steps: np.ndarray | None = None         # the logged steps (every d's sweep logs the same)
    w_history: np.ndarray | None = None     # (T, units): best multiple of I of the final M at every logged step

    def cells(self) -> dict:
        """The unit configurations: (d, L) -> indices of their seeds' units."""
        out: dict = {}
        for i, (d, c) in enumerate(zip(self.d, self.configs)):
            out.setdefault((int(d), float(c["L"])), []).append(i)
        return {k: np.array(v) for k, v in out.items()}


def trained_large_n(cfg: dict, res: dict[str, SweepResult], t34: Theorem34) -> TrainedLargeN:
    configs, ds, ws, rs, wp, wo, hist = [], [], [], [], [], [], []
    Ls = cfg["t34_train_L"]
    for d in cfg["t34_d"]:
        r = res[f"t34_d{d}"]
        M = final_M(r, cfg["average_last"])
        w, resid = th.best_multiple(M, np.eye(d))
        hist.append(th.best_multiple(running_final(r.M_history, cfg["average_last"]), np.eye(d))[0])
        curve = t34.curves[(d, cfg["t34_train_n"])]
        for c, wi, ri in zip(r.configs, w, resid):
            other = Ls[(Ls.index(c["L"]) + 1) % len(Ls)]
            configs.append(c)
            ds.append(d)
            ws.append(wi)
            rs.append(ri)
            wp.append(float(w_star_at(curve, th.snr(c["n"], c["L"], c["sigma"]))))
            wo.append(float(w_star_at(curve, th.snr(c["n"], other, c["sigma"]))))
    steps = np.asarray(res[f"t34_d{cfg['t34_d'][0]}"].log_steps)
    return TrainedLargeN(configs, np.array(ds), np.array(ws), np.array(rs), np.array(wp), np.array(wo), steps,
                         np.concatenate(hist, axis=1))
