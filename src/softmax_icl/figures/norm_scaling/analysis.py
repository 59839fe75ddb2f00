"""Analysis of the norm-scaling figure: trained window scales against the population optimum.

Every trained unit is compared with the population optimum of its own setting, found by a Monte Carlo scan of
the loss over ``M = w I`` (or ``w Sigma^{-p}``) that evaluates all ``w`` (and ``p``) in one stacked program
(:func:`softmax_icl.theory.loss_terms`). The results are frozen dataclasses read by attribute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ... import theory as th
from ...metrics import spectral_norm
from ...book.run import Run
from ...tasks import InputSpec, nonisotropic_covariance
from ...training import Grid, Sweep, SweepProgram, SweepResult

MAIN_SWEEPS = ("iso", "n", "noniso", "whitened", "full")   # the sweeps this module analyses
SCAN_CHUNK = 512            # tasks per chunk of the Monte Carlo scans (fixed so paired evaluations share draws)
P_GRID = np.round(np.linspace(0.0, 1.5, 13), 4)     # exponents p of the scan over M = w Sigma^-p
SETTINGS = ("isotropic", "nonisotropic", "nonisotropic_whitened")
SETTING_LABEL = {"isotropic": "isotropic", "nonisotropic": "non-isotropic",
                 "nonisotropic_whitened": "non-isotropic, whitened tasks"}
#: input distribution of each sweep
SETTING_OF = {"iso": "isotropic", "n": "isotropic", "full": "isotropic", "noniso": "nonisotropic",
              "whitened": "nonisotropic_whitened"}


# -- typed results ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CovarianceScan:
    """Scan over ``M = w Sigma^-p`` (all p of P_GRID x w of ``cov_w``) for one non-isotropic setting."""

    rows: list
    scan: th.LossTerms
    trained: th.LossTerms


@dataclass(frozen=True)
class PopulationScans:
    """Monte Carlo scans (cached): isotropic settings over ``M = w I``, the trained units on the same draws and the
    two non-isotropic settings over ``M = w Sigma^-p``."""

    iso_rows: list
    iso_scan: th.LossTerms
    iso_trained: th.LossTerms
    cov_w: np.ndarray
    cov: dict                 # "noniso" / "whitened" -> CovarianceScan
    full_trained: th.LossTerms


@dataclass(frozen=True)
class Units:
    """The trained units of one sweep, in the order of ``configs``, with their population counterparts; ``grid``: the
    sweep's grid, by which its units are selected."""

    configs: list
    grid: Grid
    w: np.ndarray             # best multiple of the predicted direction (I or Sigma^-1)
    resid: np.ndarray
    norm: np.ndarray          # final ||M||_2
    norm_history: np.ndarray  # (T, C): ||M||_2 of the logged M
    steps: np.ndarray
    # (T, C): the statistics of the final M as it stood at every logged step (:func:`running_final`)
    norm_running: np.ndarray  # ||M||_2
    w_history: np.ndarray     # best multiple of the predicted direction
    resid_iso: np.ndarray     # (C,): ||M - (tr M / d) I||_F / ||M||_F of the final M (its distance from isotropy)
    resid_iso_history: np.ndarray   # (T, C): the same of the final M at every logged step
    snr: np.ndarray
    w_pop: np.ndarray
    loss_pop: np.ndarray
    norm_pop: np.ndarray
    loss_trained: np.ndarray
    w_sat: np.ndarray | None = None         # isotropic: noiseless limit of the optimal w at each unit's n
    in_regime: np.ndarray | None = None     # iso / n sweeps: inside the chosen Theorem 3.4 regime
    # non-isotropic settings only
    loss_pop_p1: np.ndarray | None = None
    loss_by_p: np.ndarray | None = None
    p_star: np.ndarray | None = None
    p_trained: np.ndarray | None = None
    p_cost: np.ndarray | None = None
    dist_cov: np.ndarray | None = None
    dist_iso: np.ndarray | None = None
    dist_cov_history: np.ndarray | None = None  # (T, C): dist_cov of the final M at every logged step
    dist_iso_history: np.ndarray | None = None  # (T, C): dist_iso of the final M at every logged step


@dataclass(frozen=True)
class Curve:
    """Population-optimal w against s = n L^2 / sigma^2 at one n (ReLU) and its noiseless saturation level."""

    s: np.ndarray
    w: np.ndarray
    w_sat: float


@dataclass(frozen=True)
class FitEntry:
    """Log-log fit of trained (and population-optimal) w against one variable, inside the regime."""

    variable: str
    x: np.ndarray
    w: np.ndarray
    w_pop: np.ndarray
    n_points: int
    groups: list | None
    ranges: dict              # Theorem 3.4 version -> (lo, hi) of the slope against this variable
    fit: th.SlopeFit | None = None
    fit_pop: th.SlopeFit | None = None


@dataclass(frozen=True)
class InnerDim:
    """Units with M_K, M_Q in R^(r x d) against the d x d units of the same (class, L) at sigma, n, per seed, at every
    (class, L) whose population-optimal w is at least ``regime_w``. The rival of each (class, L) is the d x d units of
    its neighbouring L on the grid (the previous or the next, whichever learns the nearer seed-mean M)."""

    r: int
    keys: list                # (class, L)
    neighbour: list           # the neighbouring L of each key
    dist: np.ndarray          # (keys, seeds): ||M_r,s - mean_s M_d|| / ||mean_s M_d||
    dist_next: np.ndarray     # (keys, seeds): the same against the neighbour's d x d units
    self_dist: np.ndarray     # (keys,): seed mean of ||M_d,s - mean_s M_d|| / ||mean_s M_d||, the d x d units' spread
    gap: np.ndarray           # (keys,): ||mean M_d(L) - mean M_d(L')|| / ||mean M_d(L')||, how far the rival sits
    w: np.ndarray             # (keys,): the r x d units' best multiple of I (seed means)
    steps: np.ndarray         # the logged steps of both sweeps
    dist_history: np.ndarray  # (T, keys): seed mean of dist with the final M as it stood at every logged step


@dataclass(frozen=True)
class FullDim:
    """The full-weight units at one further ambient dimension ``d`` (ReLU, every L of full_L at sigma, n), in the
    order of ``configs``: their best multiple ``w`` of I (of the final x-block, as for the units at the chapter's d),
    the population optimum ``w_pop`` of M = w I at their own d, and their block form at the end of training, at
    initialisation and at every logged step (arrays (T, C))."""

    d: int
    configs: list
    grid: Grid
    steps: np.ndarray
    w: np.ndarray
    w_pop: np.ndarray
    block: th.BlockForm
    WV: np.ndarray            # (C, d+1, d+1): the final value matrices
    block_init: th.BlockForm
    block_history: th.BlockForm | None


@dataclass(frozen=True)
class Analysis:
    cfg: dict
    w_grid: np.ndarray
    scans: PopulationScans
    M: dict                   # sweep -> final M (C, d, d)
    cov: np.ndarray           # diagonal of Sigma
    units: dict               # sweep -> Units
    block: th.BlockForm
    WV: np.ndarray
    trained_curves: dict      # n -> Curve (the n of the trained units)
    fits: dict = field(default_factory=dict)    # variable -> FitEntry
    M_init: dict = field(default_factory=dict)  # sweep -> initial M (C, d, d): the untrained baselines
    block_init: th.BlockForm | None = None      # the full-weight units at initialisation
    inner: InnerDim | None = None               # the inner-dimension units (when the "inner" sweep ran)
    block_history: th.BlockForm | None = None   # the full-weight units at every logged step (arrays (T, C))
    full_more: dict = field(default_factory=dict)    # further ambient dimension d -> FullDim


# -- helpers --------------------------------------------------------------------------------------------

def final_M(res: SweepResult, frac: float) -> np.ndarray:
    """Mean of the logged M over the last ``frac`` of training (at least the last log)."""
    T = len(res.log_steps)
    k = max(1, int(round(frac * (T - 1))))
    return res.M_history[-k:].mean(0)


def running_final(history, frac: float) -> np.ndarray:
    """The final value as it stood at every logged step: at log ``j`` (of ``T``, along the first axis), the mean of
    the logged values over the last ``max(1, round(frac * j))`` logs up to ``j`` -- what :func:`final_M` returns had
    training stopped there (so the last one is the final M). (T, ...) -> (T, ...)."""
    H = np.asarray(history, dtype=np.float64)
    c = np.concatenate([np.zeros_like(H[:1]), np.cumsum(H, axis=0)])
    j = np.arange(H.shape[0])
    k = np.maximum(1, np.rint(frac * j).astype(int))
    return (c[j + 1] - c[j + 1 - k]) / k.reshape(-1, *[1] * (H.ndim - 1))


def w_grid(cfg: dict) -> np.ndarray:
    return np.geomspace(cfg["w_min"], cfg["w_max"], cfg["scan_points"])


def initial_state(res: SweepResult) -> dict:
    """The weights a sweep's units started from (name -> (C, ...) in the order of ``res.configs``): rebuilt from the
    sweep's init seeds, as training built them."""
    prog = SweepProgram(Sweep(**res.sweep), torch.device("cpu"), res.configs)
    return {k: v.detach()[prog.back].numpy() for k, v in prog.unit.state_dict().items()}


def _spec(cfg: dict, setting: str) -> InputSpec:
    return InputSpec(d=cfg["d"], input_dist=setting)


def _row(c: dict) -> dict:
    return dict(function_class=c["function_class"], L=c["L"], n=c["n"])


def row_key(c: dict) -> tuple:
    """What a scan row is: (class, L, n) of a configuration (the noise enters the loss afterwards)."""
    return (c["function_class"], float(c["L"]), int(c["n"]))


def _unique_rows(configs: list[dict]) -> list[dict]:
    seen, out = set(), []
    for c in configs:
        key = row_key(c)
        if key not in seen:
            seen.add(key)
            out.append(_row(c))
    return out


def row_index(rows: list[dict]) -> dict:
    """The index map of a scan's rows: (class, L, n) -> row, built once from the rows (looked up exactly)."""
    return {row_key(r): i for i, r in enumerate(rows)}


def seed_mean(values: np.ndarray, grid: Grid, keys: list[tuple]) -> np.ndarray:
    """Mean over seeds of ``values`` for each key (function_class, L, sigma, n) of the sweep's ``grid``."""
    return np.array([np.mean(values[grid.units(function_class=cls, L=L, sigma=s, n=n)]) for cls, L, s, n in keys])


# -- population scans -------------------------------------------------------------------------------

def population_scans(run: Run, res: dict[str, SweepResult], Ms: dict[str, np.ndarray]) -> PopulationScans:
    """Monte Carlo scans (cached): the loss over M = w I / w Sigma^-p for every trained setting, the trained
    units' own loss on the same draws."""
    cfg = run.cfg
    wg = w_grid(cfg)
    d = cfg["d"]
    kw = dict(n_tasks=cfg["scan_tasks"], seed=cfg["eval_seed"] + 200, device=run.device, chunk=SCAN_CHUNK)

    def compute():
        # isotropic: every (class, L, n) trained, plus the trained units on the same draws
        iso_cfgs = res["iso"].configs + res["n"].configs
        rows = _unique_rows(iso_cfgs)
        n_draw = max(r["n"] for r in rows)
        spec = _spec(cfg, "isotropic")
        iso_scan = th.loss_terms(spec, rows, wg[:, None, None] * np.eye(d), n_draw=n_draw, **kw)
        iso_trained = th.loss_terms(spec, [_row(c) for c in iso_cfgs], np.concatenate([Ms["iso"], Ms["n"]]),
                                    paired=True, n_draw=n_draw, **kw)
        # non-isotropic settings: M = w Sigma^-p for every p of P_GRID, and the trained units
        cov = nonisotropic_covariance(d).numpy()
        wsub = wg[(wg >= 0.1) & (wg <= 100)][::2]
        mats = np.concatenate([wsub[:, None, None] * np.diag(cov ** -p) for p in P_GRID])
        covs = {}
        for key, setting in (("noniso", "nonisotropic"), ("whitened", "nonisotropic_whitened")):
            crows = _unique_rows(res[key].configs)
            cspec = _spec(cfg, setting)
            covs[key] = CovarianceScan(crows, th.loss_terms(cspec, crows, mats, **kw),
                                       th.loss_terms(cspec, [_row(c) for c in res[key].configs], Ms[key],
                                                     paired=True, **kw))
        # the full-parameter units: their x-block as M, on the isotropic draws
        full_trained = th.loss_terms(_spec(cfg, "isotropic"), [_row(c) for c in res["full"].configs],
                                     Ms["full"], paired=True, n_draw=n_draw, **kw)
        return PopulationScans(rows, iso_scan, iso_trained, wsub, covs, full_trained)

    key = {"train": {k: res[k].sweep for k in MAIN_SWEEPS}, "scan_tasks": cfg["scan_tasks"], "w": wg.tolist(),
           "seed": kw["seed"], "p": P_GRID.tolist(), "chunk": SCAN_CHUNK,
           "average_last": cfg["average_last"]}
    return run.cached("population_scan", key, compute)


# -- analysis ---------------------------------------------------------------------------------------

def _units(cfg: dict, key: str, r: SweepResult, M: np.ndarray, base: np.ndarray, scans: PopulationScans,
           iso_sigma: np.ndarray, n_iso: int) -> Units:
    d, wg = cfg["d"], w_grid(cfg)
    cov = nonisotropic_covariance(d).numpy()
    cfgs = r.configs
    w, resid = th.best_multiple(M, base)
    Mt = running_final(r.M_history, cfg["average_last"])                      # (T, C, d, d)
    sig = np.array([c["sigma"] for c in cfgs])
    common = dict(configs=cfgs, grid=r.grid, w=w, resid=resid, norm=spectral_norm(M),
                  norm_history=spectral_norm(r.M_history), steps=np.asarray(r.log_steps),
                  norm_running=spectral_norm(Mt), w_history=th.best_multiple(Mt, base)[0],
                  resid_iso=th.best_multiple(M, np.eye(d))[1], resid_iso_history=th.best_multiple(Mt, np.eye(d))[1],
                  snr=th.snr([c["n"] for c in cfgs], [c["L"] for c in cfgs], sig))
    if key in ("iso", "n", "full"):
        sc, rows = scans.iso_scan, scans.iso_rows
        ri = np.array([row_index(rows)[row_key(c)] for c in cfgs])
        loss = sc.bias[ri] + sig[:, None] ** 2 * sc.noise[ri]
        w_pop, loss_pop = th.refine_minimum(wg, loss)
        if key == "full":
            loss_trained = scans.full_trained.loss(sig)
        else:   # the isotropic and n-sweep units were evaluated together, in that order
            sl = slice(0, n_iso) if key == "iso" else slice(n_iso, None)
            loss_trained = scans.iso_trained.loss(iso_sigma)[sl]
        # saturation level of the ReLU window at this n: argmin of the bias (noise -> 0)
        w_sat = np.array([th.saturation_w(wg, sc.bias[i]) for i in ri])
        in_regime = None
        if key in ("iso", "n"):
            in_regime = np.array([c["function_class"] == "relu" for c in cfgs]) & \
                (w_pop >= cfg["regime_w"]) & (w_pop < cfg["regime_saturation"] * w_sat)
        return Units(**common, w_pop=w_pop, loss_pop=loss_pop, norm_pop=w_pop, loss_trained=loss_trained,
                     w_sat=w_sat, in_regime=in_regime)
    cs = scans.cov[key]
    sc, rows = cs.scan, cs.rows
    ri = np.array([row_index(rows)[row_key(c)] for c in cfgs])
    W = len(scans.cov_w)
    loss = (sc.bias[ri] + sig[:, None] ** 2 * sc.noise[ri]).reshape(len(cfgs), len(P_GRID), W)
    best_w, best_l = th.refine_minimum(scans.cov_w, loss)                       # (C, P)
    p_star, _ = th.refine_minimum(P_GRID, best_l, log=False)
    j1 = int(np.argmin(np.abs(P_GRID - 1.0)))
    jb = best_l.argmin(-1)
    p_trained = th.covariance_exponent(M, cov)
    # what the trained exponent costs in the population: loss at p_trained (best w) over the minimum
    p_cost = np.array([np.interp(pt, P_GRID, bl) / bl.min() - 1 if np.isfinite(pt) else np.nan
                       for pt, bl in zip(p_trained, best_l)])
    return Units(**common, w_pop=best_w[:, j1], loss_pop=best_l.min(-1),
                 norm_pop=np.array([bw[j] * np.max(cov ** -P_GRID[j]) for bw, j in zip(best_w, jb)]),
                 loss_trained=cs.trained.loss(sig), loss_pop_p1=best_l[:, j1], loss_by_p=best_l, p_star=p_star,
                 p_trained=p_trained, p_cost=p_cost, dist_cov=th.normalized_distance(M, base),
                 dist_iso=th.normalized_distance(M, np.eye(d)),
                 dist_cov_history=th.normalized_distance(Mt, base),
                 dist_iso_history=th.normalized_distance(Mt, np.eye(d)))


def analyse(run: Run, res: dict[str, SweepResult]) -> Analysis:
    """Window scales, population optima, regimes, slope fits and covariance/block-form measurements."""
    cfg = run.cfg
    d, wg = cfg["d"], w_grid(cfg)
    cov = nonisotropic_covariance(d).numpy()
    base = {"iso": np.eye(d), "n": np.eye(d), "full": np.eye(d), "noniso": th.window_base(d, "nonisotropic"),
            "whitened": th.window_base(d, "nonisotropic")}
    Ms = {k: final_M(res[k], cfg["average_last"]) for k in MAIN_SWEEPS}
    scans = population_scans(run, res, Ms)
    iso_sigma = np.array([c["sigma"] for c in res["iso"].configs + res["n"].configs])
    units = {key: _units(cfg, key, res[key], Ms[key], base[key], scans, iso_sigma, len(res["iso"].configs))
             for key in ("iso", "n", "noniso", "whitened", "full")}
    fs, f0 = res["full"].final_state, initial_state(res["full"])
    block = th.block_form(fs["WK"], fs["WQ"], fs["WV"])

    # population curves w*(s) at the n of the trained units (from the ReLU rows of the isotropic scan)
    s_grid = np.geomspace(1.0, 1e8, 241)
    rows, sc = scans.iso_rows, scans.iso_scan
    trained_curves = {}
    for n in sorted({c["n"] for c in units["iso"].configs + units["n"].configs}):
        cand = [k for k, r in enumerate(rows) if r["function_class"] == "relu" and r["n"] == n]
        i = min(cand, key=lambda k: abs(math.log(rows[k]["L"])))      # the row with L closest to 1
        L = rows[i]["L"]
        trained_curves[n] = Curve(s_grid, th.optimal_w_curve(wg, sc.bias[i] / L**2, sc.noise[i], s_grid, n),
                                  th.saturation_w(wg, sc.bias[i]))
    return Analysis(cfg, wg, scans, Ms, cov, units, block, fs["WV"], trained_curves,
                    slope_fits(cfg, units["iso"], units["n"]), M_init={k: res[k].M_history[0] for k in MAIN_SWEEPS},
                    block_init=th.block_form(f0["WK"], f0["WQ"], f0["WV"]),
                    inner=inner_dimension(cfg, res, Ms["iso"], units["iso"]) if "inner" in res else None,
                    block_history=block_history(res["full"]),
                    full_more={d: full_at(run, res[f"full_d{d}"], d) for d in cfg["full_more_d"]})


def full_at(run: Run, r: SweepResult, d: int) -> FullDim:
    """The full-weight units of the sweep ``full_d<d>``, with the population optimum of M = w I on draws of their own
    dimension (a cached Monte Carlo scan over the chapter's w grid, the same tasks, seed and chunking as the
    chapter's isotropic scan)."""
    cfg = run.cfg
    wg = w_grid(cfg)
    rows = _unique_rows(r.configs)
    kw = dict(n_tasks=cfg["scan_tasks"], seed=cfg["eval_seed"] + 200, device=run.device, chunk=SCAN_CHUNK)
    key = {"train": r.sweep, "scan_tasks": cfg["scan_tasks"], "w": wg.tolist(), "seed": kw["seed"],
           "chunk": SCAN_CHUNK}
    spec = InputSpec(d=d, input_dist="isotropic")
    scan = run.cached(f"population_scan_d{d}", key,
                      lambda: th.loss_terms(spec, rows, wg[:, None, None] * np.eye(d), **kw))
    ri = np.array([row_index(rows)[row_key(c)] for c in r.configs])
    sig = np.array([c["sigma"] for c in r.configs])
    w_pop, _ = th.refine_minimum(wg, scan.bias[ri] + sig[:, None] ** 2 * scan.noise[ri])
    w, _ = th.best_multiple(final_M(r, cfg["average_last"]), np.eye(d))
    fs, f0 = r.final_state, initial_state(r)
    return FullDim(d, r.configs, r.grid, np.asarray(r.log_steps), w, w_pop,
                   th.block_form(fs["WK"], fs["WQ"], fs["WV"]), fs["WV"],
                   th.block_form(f0["WK"], f0["WQ"], f0["WV"]), block_history(r))


def block_history(res: SweepResult) -> th.BlockForm | None:
    """The block form of full-weight units at every logged step (arrays (T, C)), where their training logged the
    weights (:class:`softmax_icl.figures.norm_scaling.sweeps.FullWeights`); else None."""
    h = getattr(res, "weights_history", None)
    return th.block_form(h["WK"], h["WQ"], h["WV"]) if h else None


def inner_dimension(cfg: dict, res: dict[str, SweepResult], M_iso: np.ndarray, u_iso: Units) -> InnerDim:
    """The rebuttal's inner dimension: per seed, the final M of the r x d units against the seed-mean final M of the
    d x d units of the iso sweep at the same (class, L, sigma, n), and (the rival) against that of the neighbouring
    L of the grid whose seed-mean M is nearer (the previous or the next L)."""
    r_inner = res["inner"]
    M_r = final_M(r_inner, cfg["average_last"])
    sigma, n, Ls = cfg["sigma"], cfg["n"], list(cfg["L_values"])
    if list(r_inner.log_steps) != list(res["iso"].log_steps):
        raise ValueError("the inner-dimension units and the d x d units must be logged at the same steps")
    H_r = running_final(r_inner.M_history, cfg["average_last"])              # (T, C_r, d, d)
    H_d = running_final(res["iso"].M_history, cfg["average_last"])           # (T, C, d, d)

    def mean_M(M, grid, cls, L):
        return M[grid.units(function_class=cls, L=L, sigma=sigma, n=n)].mean(0)

    def rel(A, B):                       # ||A - B||_F / ||B||_F over the leading axes of A
        return np.linalg.norm(A - B, axis=(-2, -1)) / np.linalg.norm(B)

    keys, neighbour, dist, dist_next, gap, w, spread, hist = [], [], [], [], [], [], [], []
    for cls in cfg["classes"]:
        for j, L in enumerate(Ls):
            if seed_mean(u_iso.w_pop, u_iso.grid, [(cls, L, sigma, n)])[0] < cfg["regime_w"]:
                continue
            ir = r_inner.grid.units(function_class=cls, L=L, sigma=sigma, n=n)
            Mr = M_r[ir]                                                                  # (seeds, d, d)
            Hd = H_d[:, u_iso.grid.units(function_class=cls, L=L, sigma=sigma, n=n)].mean(1)  # (T, d, d)
            hist.append((np.linalg.norm(H_r[:, ir] - Hd[:, None], axis=(-2, -1))
                         / np.linalg.norm(Hd, axis=(-2, -1))[:, None]).mean(1))
            Md = mean_M(M_iso, u_iso.grid, cls, L)
            near = [Ls[k] for k in (j - 1, j + 1) if 0 <= k < len(Ls)]
            gaps = [rel(Md, mean_M(M_iso, u_iso.grid, cls, Lk)) for Lk in near]
            Ln = near[int(np.argmin(gaps))]
            Mn = mean_M(M_iso, u_iso.grid, cls, Ln)
            keys.append((cls, L))
            neighbour.append(Ln)
            dist.append(rel(Mr, Md))
            dist_next.append(rel(Mr, Mn))
            gap.append(min(gaps))
            w.append(float(np.trace(Mr.mean(0))) / cfg["d"])
            spread.append(float(rel(M_iso[u_iso.grid.units(function_class=cls, L=L, sigma=sigma, n=n)], Md).mean()))
    seeds = int(r_inner.sweep["seeds"])
    return InnerDim(int(r_inner.sweep["inner_dim"]), keys, neighbour, np.array(dist).reshape(-1, seeds),
                    np.array(dist_next).reshape(-1, seeds), np.array(spread), np.array(gap), np.array(w),
                    np.asarray(r_inner.log_steps, dtype=np.float64), np.array(hist).reshape(-1, len(r_inner.log_steps)).T)


def sweep_index(u: Units, cls: str, sweep: str, cfg: dict) -> np.ndarray:
    """Indices of the units of one sweep direction: 'L' (sigma fixed), 'sigma' (L = L_sigma) of the iso sweep."""
    if sweep == "L":
        return u.grid.units(function_class=cls, sigma=cfg["sigma"])
    if sweep == "sigma":
        return u.grid.units(function_class=cls, L=cfg["L_sigma"])
    raise ValueError(f"sweep direction {sweep!r} is not one of 'L', 'sigma'")


def slope_fits(cfg: dict, u_iso: Units, u_n: Units) -> dict:
    """Log-log fits of trained w inside the regime (ReLU, isotropic) against L, sigma, n and pooled against s."""
    d = cfg["d"]
    fits = {}

    def add(name, variable, x, w, w_pop, groups=None):
        ok = (w > 0) & np.isfinite(w)
        g = None if groups is None else np.asarray(groups)[ok]
        fit = fit_pop = None
        if np.unique(x[ok]).size >= 2 and ok.sum() > (1 if g is None else len(set(g))):
            fit = th.fit_loglog(x[ok], w[ok], groups=None if g is None else list(g))
            fit_pop = th.fit_loglog(x[ok], w_pop[ok], groups=None if g is None else list(g))
        fits[name] = FitEntry(variable, x, w, w_pop, int(ok.sum()), groups,
                              {v: th.theorem34_slope_range(d, variable, v) for v in th.THEOREM_34_VERSIONS},
                              fit, fit_pop)

    for sweep, var in (("L", "L"), ("sigma", "sigma")):
        idx = sweep_index(u_iso, "relu", sweep, cfg)
        idx = idx[u_iso.in_regime[idx]]
        x = np.array([u_iso.configs[i][var] for i in idx], dtype=float)
        add(var, var, x, u_iso.w[idx], u_iso.w_pop[idx])
    idx = np.nonzero(u_n.in_regime)[0]
    add("n", "n", np.array([u_n.configs[i]["n"] for i in idx], dtype=float), u_n.w[idx], u_n.w_pop[idx],
        groups=[u_n.configs[i]["L"] for i in idx])       # one constant per L: w ~ C(L) n^slope
    # pooled: every ReLU unit inside the regime, against s
    ii = np.nonzero(u_iso.in_regime)[0]
    add("snr", "snr", np.concatenate([u_iso.snr[ii], u_n.snr[idx]]),
        np.concatenate([u_iso.w[ii], u_n.w[idx]]), np.concatenate([u_iso.w_pop[ii], u_n.w_pop[idx]]))
    return fits
