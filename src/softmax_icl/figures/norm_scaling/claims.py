"""Checks of the norm-scaling figure, each decided by the statistical design (``book/design.yml``, ``Run.decide``):
per-seed samples of the design's statistic in every cell, its seed mean along training where the design follows it,
every rival through the same statistic and test; population scans take the design's exact test."""

from __future__ import annotations

import numpy as np

from ... import stats
from ... import theory as th
from ...book import design
from ...book.records import BASELINE_SOURCE as BASE
from ...book.run import Run
from .analysis import SETTING_LABEL, SETTING_OF, Analysis, Units
from .dynamics import Ordering
from .theorem34 import Theorem34, TrainedLargeN, edge_distance, jackknife_se
from .tradeoff import check_tradeoff
from .trends import L_trend, key_numbers, panels, sigma_trend, untrained, w_pop_other_L

#: The check ids that other modules of the chapter name (each check's design is in book/design.yml).
COVARIANCE_LEMMA_WHITENED = "covariance-lemma-whitened"
GROWTH_RATE_ORDERS_WITH_L = "growth-rate-orders-with-L"
NORM_GROWS_WITH_L = "norm-grows-with-L"
THEOREM34_ISOTROPIC = "theorem34-isotropic"
THEOREM34_SLIDES_RANGE = "theorem34-slides-range"
TRAINED_W_NEAR_OPTIMUM = "trained-w-near-optimum"
W_FALLS_WITH_SIGMA = "w-falls-with-sigma"
W_RISES_WITH_N = "w-rises-with-n"

SRC_FIG3 = "Collins et al. Fig. 3 (slides 'Empirical scaling of ||M|| with L')"
SRC_THM = "Collins et al. Theorem 3.4 (slides' Theorem 2)"
BEYOND = "beyond the papers"
#: A per-seed w <= 0 (no window, or an inverted one) at the end of training: its log is undefined.
W_UNDEFINED = "a trained w <= 0 has no log: the check cannot be computed as the design writes it"


#: Short titles of the checks for the book's tables (MyST maths); a control is titled by its statement's first clause.
TITLES = {
    'norm-grows-with-L': 'final $\\|M\\|_2$ rises with $L$',
    'w-falls-with-sigma': '$w$ falls as $\\sigma$ grows',
    'w-rises-with-n': '$w$ rises with $n$',
    'growth-rate-orders-with-L': '$\\|M\\|_2$ grows faster for larger $L$',
    'growth-rate-orders-with-L-every-seed': '$\\|M\\|_2$ grows faster for larger $L$, the whole grid',
    'theorem34-slides-range': 'local exponent of $w^*$ inside $[1/d, 2/d]$',
    'theorem34-sketch-range': "local exponent inside the sketch's $[1/(d+2), 2/(d+2)]$",
    'theorem34-sphere-range': "local exponent inside the sphere's $[1/(d+1), 2/(d+1)]$",
    'theorem34-isotropic': 'the trained $M$ is $wI$',
    'noise-term-exponent-d-over-2': 'noise term grows like $w^{d/2}$',
    'noise-term-exponent-sphere': 'noise term grows like $w^{(d-1)/2}$',
    'L-over-sigma-window-narrows': '$w^*$ narrows as $L/\\sigma$ grows, up to the noiseless optimum',
    'L-over-sigma-saturates-at-fixed-n': 'at fixed $n$, $w^*$ stops at the noiseless optimum',
    'covariance-lemma-whitened': "$M \\propto \\Sigma^{-1}$ under the lemma's symmetry",
    'covariance-lemma-noniso': '$M \\propto \\Sigma^{-1}$ without the symmetry',
    'full-weights-block-form': 'full $W_K^\\top W_Q$ takes the block form',
    'full-weights-value-ignores-x': 'the value row ignores the covariates',
    'inner-dimension-same-M': 'a larger inner dimension learns the same $M$',
    'theorem34-trained-large-n': 'trained units at large $n$ near the optimal $w^*$',
    'trained-w-near-optimum': 'the trained $w$ near the population optimum',
    'trained-loss-near-optimum': "the trained unit's loss near the optimum's",
    'covariance-exponent-matches-population': 'the exponent of $M \\propto \\Sigma^{-p}$ matches the optimum',
}


# -- helpers ---------------------------------------------------------------------------------------------------

def trajectory(steps, hist) -> tuple[np.ndarray, np.ndarray]:
    """(steps, seed means) of a per-seed statistic logged along training, ``hist`` (T, seeds), at the logged steps
    where every seed's statistic is defined (e.g. a log ratio of w once every w is positive)."""
    hist = np.asarray(hist, dtype=np.float64)
    ok = np.isfinite(hist).all(1)
    return np.asarray(steps, dtype=np.float64)[ok], hist[ok].mean(1)


def followed(samples, steps, hist) -> tuple:
    """A cell of ``Run.decide`` with its trajectory: (per-seed samples, steps, seed means)."""
    return (np.asarray(samples, dtype=np.float64), *trajectory(steps, hist))


def log_ratio(a, b) -> np.ndarray:
    """``log(a / b)`` elementwise; NaN where either is not positive (see :func:`trajectory`)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((a > 0) & (b > 0), np.log(np.where(a > 0, a, 1.0) / np.where(b > 0, b, 1.0)), np.nan)


def defined(x: np.ndarray, cid: str, where: str) -> np.ndarray:
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{cid} at {where}: {W_UNDEFINED} (per-seed values {np.round(x, 4).tolist()})")
    return x


def seeds_of(cells: dict) -> int:
    """The number of seeds behind a dict of cells (one count: every cell of a check has the same seeds)."""
    n = {len(v[0] if isinstance(v, tuple) else v) for v in cells.values()}
    return n.pop() if len(n) == 1 else max(n)


def unit_label(c: dict, sweep: str = "") -> str:
    head = f"{sweep}: " if sweep else ""
    return f"{head}{c['function_class']}, L = {c['L']:g}, sigma = {c['sigma']:g}, n = {c['n']}"


def configurations(u: Units, keep=None) -> list[tuple[dict, np.ndarray]]:
    """A sweep's unit configurations (first seed's config, every seed's unit index) with ``keep(index)`` true."""
    g, out = u.grid, []
    for ci in range(len(g.classes)):
        for si in range(len(g.settings)):
            for ni in range(len(g.n)):
                idx = g.at(ci, si, ni)
                if keep is None or keep(idx[0]):
                    out.append((u.configs[idx[0]], idx))
    return out


def _idx(u: Units, cls: str, L: float, sigma: float, n: int) -> np.ndarray:
    return u.grid.units(function_class=cls, L=L, sigma=sigma, n=n)


# -- Figure 3 and the extreme cases: final norms and w along L, sigma, n ----------------------------------------

def check_trends(run: Run, a: Analysis) -> None:
    """Final ||M||_2 along L (every panel, up to its saturation point), w along sigma (beyond its saturated end) and
    along n, per seed as log ratios of consecutive grid points, each against the untrained units."""
    cfg = run.cfg
    cells, base, notes, beyond = {}, {}, [], {}
    for key, cls in panels(a):
        t, u = L_trend(a, key, cls), a.units[key]
        norm0 = untrained(a, key)[0]
        panel = f"{cls}/{SETTING_LABEL[SETTING_OF[key]]}"
        notes.append(f"{panel} up to L = {t.L[t.boundary]:g}")
        beyond[f"{cls}_{key}"] = {"boundary_L": t.L[t.boundary], "boundary_snr": t.snr_boundary,
                                  "norm_last_over_boundary": t.norm[-1] / t.norm[t.boundary],
                                  "pop_last_over_boundary": t.norm_pop[-1] / t.norm_pop[t.boundary]}
        for k in range(t.boundary):
            i0, i1 = (_idx(u, cls, L, cfg["sigma"], cfg["n"]) for L in t.L[k:k + 2])
            label = f"{panel}, L = {t.L[k]:g} -> {t.L[k + 1]:g}"
            cells[label] = followed(np.log(u.norm[i1] / u.norm[i0]), u.steps,
                                    np.log(u.norm_running[:, i1] / u.norm_running[:, i0]))
            base[label] = np.log(norm0[i1] / norm0[i0])
    what = (f"log of the final ||M||_2 (mean M over the last {cfg['average_last']:.0%} of training) at one L over "
            f"the previous L, per seed ({seeds_of(cells)} seeds), every panel and every step of L up to its "
            f"saturation point ({'; '.join(notes)})")
    run.decide("norm-grows-with-L", what + "; lower bound of the mean vs log 1.05", cells,
               source=SRC_FIG3 + ": ||M|| ends larger for larger L, ReLU and cosine, "
               "isotropic and non-isotropic")
    run.decide("norm-grows-with-L-untrained", "control: the same for the untrained units (initial M); " + what, base,
               source=BASE)
    run.record(L_regime_boundaries=beyond)

    u, cells, base, notes = a.units["iso"], {}, {}, []
    w0 = untrained(a, "iso")[1]
    for cls in cfg["classes"]:
        t = sigma_trend(a, cls)
        notes.append(f"{cls} from sigma = {t.sigma[t.boundary]:g}")
        for k in range(t.boundary, len(t.sigma) - 1):
            i0, i1 = (_idx(u, cls, cfg["L_sigma"], s, cfg["n"]) for s in t.sigma[k:k + 2])
            label = f"{cls}, sigma = {t.sigma[k]:g} -> {t.sigma[k + 1]:g}"
            cells[label] = followed(defined(log_ratio(u.w[i1], u.w[i0]), "w-falls-with-sigma", label), u.steps,
                                    log_ratio(u.w_history[:, i1], u.w_history[:, i0]))
            base[label] = np.log(w0[i1] / w0[i0])
    what = (f"log of the trained w = tr(M)/d at one sigma over the previous sigma (L = {cfg['L_sigma']:g}), per seed "
            f"({seeds_of(cells)} seeds), every class and every step of the sigma grid beyond its saturated low-noise "
            f"end ({'; '.join(notes)})")
    run.decide("w-falls-with-sigma", what + "; upper bound of the mean vs log(1/1.05)", cells,
               source=SRC_THM + ": sigma -> inf: w -> 0 (slides' extreme examples)")
    run.decide("w-falls-with-sigma-untrained", "control: the same for the untrained units; " + what, base, source=BASE)

    u, cells, base = a.units["n"], {}, {}
    w0 = untrained(a, "n")[1]
    ns = cfg["n_values"]
    for L in cfg["n_sweep_L"]:
        for k in range(len(ns) - 1):
            i0, i1 = (_idx(u, "relu", L, cfg["sigma"], n) for n in ns[k:k + 2])
            label = f"L = {L:g}, n = {ns[k]} -> {ns[k + 1]}"
            cells[label] = followed(defined(log_ratio(u.w[i1], u.w[i0]), "w-rises-with-n", label), u.steps,
                                    log_ratio(u.w_history[:, i1], u.w_history[:, i0]))
            base[label] = np.log(w0[i1] / w0[i0])
    what = (f"log of the trained w (ReLU, sigma = {cfg['sigma']:g}) at one n over the previous n, per seed "
            f"({seeds_of(cells)} seeds), every L of {cfg['n_sweep_L']} and every step of n = {ns}")
    run.decide("w-rises-with-n", what + "; lower bound of the mean vs log 1.05", cells,
               source=SRC_THM + ": n -> inf: w -> inf (slides' extreme examples)")
    run.decide("w-rises-with-n-untrained", "control: the same for the untrained units; " + what, base, source=BASE)


def growth_steps(gain: Ordering, late: Ordering, L_max: dict) -> tuple[dict, dict, dict]:
    """Per panel and step of L, the per-seed G(L') - G(L) (:mod:`.dynamics`) up to ``L_max[(setting, class)]`` (the
    claim, followed where logged), the late gains' difference there (the rival), and over the whole grid."""
    claim, rival, whole = {}, {}, {}
    for (setting, cls), g in gain.by_panel.items():                   # g: (seeds, L) gains
        gl, h = late.by_panel[(setting, cls)], (gain.history or {}).get((setting, cls))
        inside = gain.L <= L_max[(setting, cls)] * (1 + 1e-9)
        for k in range(len(gain.L) - 1):
            label = f"{cls}/{setting}, L = {gain.L[k]:g} -> {gain.L[k + 1]:g}"
            x = g[:, k + 1] - g[:, k]
            whole[label] = x
            if inside[k + 1]:
                claim[label] = x if h is None else (x, gain.steps, (h[..., k + 1] - h[..., k]).mean(1))
                rival[label] = gl[:, k + 1] - gl[:, k]
    return claim, rival, whole


def check_dynamics(run: Run, a: Analysis, gain: Ordering, late: Ordering) -> None:
    """Figure 3's growth (:func:`growth_steps`): the claim up to each panel's saturation point, the finding past it."""
    cfg = run.cfg
    L_max = {(SETTING_LABEL[SETTING_OF[key]], cls): (t := L_trend(a, key, cls)).L[t.boundary]
             for key, cls in panels(a)}
    claim, rival, whole = growth_steps(gain, late, L_max)
    used = [f"{cls}/{setting} up to L = {max(L for L in gain.L if L <= L_max[(setting, cls)] * (1 + 1e-9)):g}"
            for setting, cls in gain.by_panel]
    what = (f"G(L') - G(L) per seed ({seeds_of(whole)} seeds), G the mean over the logged steps of log(||M(t)||_2 / "
            f"||M(0)||_2) during {cfg['dyn_steps']} Adam steps (lr {cfg['dyn_lr']:g}, init scale {cfg['dyn_init']:g}), "
            f"L' the next L of {gain.L.tolist()}")
    run.decide("growth-rate-orders-with-L", f"{what}, every panel up to its saturation point ({'; '.join(used)}); "
               "followed along training; lower bound of the mean vs log 1.1", claim,
               source=SRC_FIG3 + ": ||M|| 'grows faster during pretraining with larger L'")
    run.decide("growth-rate-orders-with-L-late", "control: the same difference of the gains over the last quarter of "
               "training alone (after the norms settled); " + what, rival, source=BASE)
    run.decide("growth-rate-orders-with-L-every-seed", f"{what}, every panel over the whole grid (past the "
               "saturation point); lower bound of the mean vs log 1.1", whole,
               source=BEYOND + ": the claim past the saturation point")


# -- Theorem 3.4 --------------------------------------------------------------------------------------------------

def check_theorem34(run: Run, a: Analysis, t: Theorem34, big: TrainedLargeN) -> None:
    cfg = run.cfg
    n_max, rho = t.ns[-1], t.rho_check
    lsig = cfg["L_sigma"] / cfg["sigma"]
    e = {d: t.exponent[(d, n_max, rho)] for d in t.ds}
    jack = {d: t.exponent_jack[(d, n_max, rho)] for d in t.ds}

    def cell(d, rng):
        return stats.Estimate(float(edge_distance(e[d], rng)), jackknife_se(edge_distance(jack[d], rng)))

    etxt = ", ".join(f"d = {d}: {e[d]:.3f} ± {jackknife_se(jack[d]):.3f}" for d in t.ds)
    for version, src in (
            ("slides", SRC_THM + ": Omega((nL²/σ²)^(1/d)) < w < O((nL²/σ²)^(2/d)) for sufficiently large n"),
            ("sketch", "the slides' proof sketch (noise term Θ(σ² w^(d/2)/n), bias between L²/w² and "
                       "L²/w), carried to its range [1/(d+2), 2/(d+2)] by the book"),
            ("sphere", "the sketch with the noise term of inputs on S^(d-1), w^((d-1)/2): range "
                       "[1/(d+1), 2/(d+1)] (derived by the book)")):
        rng = {d: th.theorem34_exponents(d, version) for d in t.ds}
        rtxt = ", ".join(f"[{rng[d][0]:.3f}, {rng[d][1]:.3f}]" for d in t.ds)
        run.decide(f"theorem34-{version}-range", f"local exponent d log w*/d log s of the population optimum (ReLU) at "
                   f"n = {n_max}, L/sigma = {lsig:g} ({etxt}; Monte Carlo standard error: jackknife over "
                   f"{cfg['t34_batches']} batches of {cfg['t34_tasks']} tasks) minus the nearer edge of the {version} "
                   f"range ({rtxt}), every d; exact test, value -+ 1.645 s.e. vs 0",
                   {f"d = {d}": cell(d, rng[d]) for d in t.ds}, source=src)
    ds = list(t.ds)
    pairs = [(d, ds[(i + 1) % len(ds)]) for i, d in enumerate(ds)]
    run.decide("theorem34-slides-range-other-d", "control: the exponent of each d minus the nearer edge of the slides "
               "range of another d (" + ", ".join(f"{d} vs {o}" for d, o in pairs) + ")",
               {f"d = {d} vs range of d = {o}": cell(d, th.theorem34_exponents(o, "slides")) for d, o in pairs},
               source=BEYOND)
    # M* = w I: the trained isotropic ReLU units (their M is free), against the units on non-isotropic inputs
    u, v = a.units["iso"], a.units["noniso"]
    cells, rival = {}, {}
    for L in cfg["L_values"]:
        i = _idx(u, "relu", L, cfg["sigma"], cfg["n"])
        if u.w_pop[i[0]] < cfg["regime_w"]:
            continue
        cells[f"L = {L:g}"] = followed(u.resid_iso[i], u.steps, u.resid_iso_history[:, i])
        rival[f"L = {L:g}"] = v.resid_iso[_idx(v, "relu", L, cfg["sigma"], cfg["n"])]
    what = (f"||M - (tr M/d) I||_F / ||M||_F of the final M per seed ({seeds_of(cells)} seeds), isotropic ReLU units "
            f"(sigma = {cfg['sigma']:g}, n = {cfg['n']}) at every L whose optimal w >= {cfg['regime_w']:g} "
            f"({', '.join(cells)})")
    run.decide("theorem34-isotropic", what + "; upper bound of the mean vs 0.1", cells,
               source=SRC_THM + ": the minimiser 'is M* = w_KQ I_d' (and the "
               "rebuttal: 'all optimal M must be of the form M = w I_d')")
    run.decide("theorem34-isotropic-noniso", "control: the same distance for the ReLU units on non-isotropic inputs at "
               "the same L (their optimum is w Sigma^-p)", rival, source=BASE)
    # the noise term's exponent (n -> inf closed form; the Monte Carlo beside it)
    k = {d: t.noise[d].exponent for d in t.ds}
    dev = max(t.noise[d].mc_max_rel_dev for d in t.ds)
    ktxt = ", ".join(f"d = {d}: {k[d]:.3f}" for d in t.ds)
    head = (f"exponent k of n E[sum_i a_i^2] against w over w in [30, 300] (n -> inf closed form on S^(d-1), "
            f"{ktxt}; it matches the Monte Carlo at n = {n_max} within {dev:.1%} where 1/E[sum a^2] >= 100)")
    run.decide("noise-term-exponent-d-over-2", f"{head}: largest |k - d/2| over d; exact, vs 0.25",
               {"every d": [max(abs(k[d] - d / 2) for d in t.ds)]},
               source="a step of the slides' proof sketch, L_noise = Θ(σ² (w^(d/2) + 1) / n), read with d the "
                      "ambient dimension (not counted as a claim: see the ledger's not_counted)")
    run.decide("noise-term-exponent-sphere", f"{head}: largest |k - (d-1)/2| over d; exact, vs 0.25",
               {"every d": [max(abs(k[d] - (d - 1) / 2) for d in t.ds)]},
               source=BEYOND + " (the noise term on the sphere grows like w^((d-1)/2))")
    # trained units at the largest n against the population curve
    cells, rival = {}, {}
    for (d, L), i in big.cells().items():
        label = f"d = {d}, L = {L:g}"
        w = defined(big.w[i], "theorem34-trained-large-n", label)
        cells[label] = followed(np.abs(np.log(w / big.w_pop[i])), big.steps,
                                np.abs(log_ratio(big.w_history[:, i], big.w_pop[i][None])))
        rival[label] = np.abs(np.log(w / big.w_pop_other[i]))
    what = (f"|log(w / w*)| per seed ({seeds_of(cells)} seeds), w the trained ReLU unit's at n = {cfg['t34_train_n']} "
            f"(sigma = {cfg['sigma']:g}), w* the population optimum of its own (d, n, s), every (d, L)")
    run.decide("theorem34-trained-large-n", what + "; upper bound of the mean vs log 1.25", cells,
               source=BEYOND + " (the population curves of Theorem 3.4 against training)")
    run.decide("theorem34-trained-large-n-other-L", "control: the same units against the population optimum of the "
               "other L of the sweep", rival, source=BEYOND)
    run.record(theorem34_exponent={f"d{d}": {f"n{n}": {f"rho{r:g}": t.exponent[(d, n, r)] for r in t.rhos}
                                             for n in t.ns} for d in t.ds},
               theorem34_exponent_se={f"d{d}": {f"n{n}": {f"rho{r:g}": jackknife_se(t.exponent_jack[(d, n, r)])
                                                          for r in t.rhos} for n in t.ns} for d in t.ds},
               noise_exponent={f"d{d}": {"closed_form": t.noise[d].exponent, "monte_carlo": t.noise[d].exponent_mc,
                                         "mc_max_rel_dev": t.noise[d].mc_max_rel_dev} for d in t.ds},
               trained_large_n={"w": big.w, "w_population": big.w_pop, "w_population_other_L": big.w_pop_other})


def check_window_limit(run: Run, t: Theorem34) -> None:
    """The slides' extreme case L >> sigma (w -> inf) at a fixed n: the population optimum w* rises at every step of
    the L/sigma grid of the exponent tables until it is within 10 % of the noiseless optimum w_0(n) (every d and n of
    the scans). The rival is the pure-noise optimum (the minimiser of the noise term alone) along the same grid. That
    w* stops at w_0(n) at a fixed n (at the grid's largest L/sigma) is a finding."""
    grid = t.L_over_sigma()
    rhos = np.asarray(t.rhos, dtype=np.float64)
    cells, rival, sat = {}, {}, {}
    for d in t.ds:
        s = t.scans[d]
        for k, n in enumerate(t.ns):
            w, w0 = t.w_star(d, n), t.curves[(d, n)].w_sat
            w_noise = th.optimal_w_curve(s.w, np.zeros_like(s.noise[k]), s.noise[k], n * rhos, n)
            for j in range(len(grid) - 1):
                if abs(w[j] / w0 - 1) <= 0.1:
                    break
                label = f"d = {d}, n = {n}, L/sigma = {grid[j]:g} -> {grid[j + 1]:g}"
                cells[label] = [float(np.log(w[j + 1] / w[j]))]
                rival[label] = [float(np.log(w_noise[j + 1] / w_noise[j]))]
            sat[f"d = {d}, n = {n}"] = [float(abs(w[-1] / w0 - 1))]
    grid_txt = ", ".join(f"{g:g}" for g in grid)
    run.decide("L-over-sigma-window-narrows", f"log-step of the population optimum w* (ReLU) between consecutive "
               f"L/sigma of the grid {grid_txt}, at every d of {list(t.ds)} and n of {list(t.ns)}, every step that "
               "starts before w* is within 10 % of the noiseless optimum w_0(n); exact, vs log 1.05", cells,
               source="Collins et al. slides, extreme examples: 'L >> sigma: ... pick the nearest neighbour, w -> inf'")
    run.decide("L-over-sigma-window-narrows-noise-only", "control: the same log-steps for the pure-noise optimum "
               "(sigma >> L: the minimiser of the noise term), in the same cells", rival, source=BASE)
    run.decide("L-over-sigma-saturates-at-fixed-n", f"|w*(L/sigma = {grid[-1]:g}) / w_0(n) - 1| at every d and n "
               "of the scans: at a fixed n the window stops narrowing at the noiseless optimum; exact, vs 0.1", sat,
               source=BEYOND + ": the extreme case at a fixed n")


# -- trained units against the population optimum -------------------------------------------------------------

def check_optimum(run: Run, a: Analysis) -> None:
    """Trained w against the population optimum of each unit configuration with a window (the optimum of the next L
    as the rival), and the trained units' population loss against the best scanned M."""
    cfg = run.cfg
    cells, rival, excess = {}, {}, {}
    for key in ("iso", "n", "whitened"):
        u = a.units[key]
        other = w_pop_other_L(a, key)
        for c, i in configurations(u, lambda j: u.w_pop[j] >= cfg["regime_w"]):
            label = unit_label(c, key)
            w = defined(u.w[i], "trained-w-near-optimum", label)
            cells[label] = followed(np.abs(np.log(w / u.w_pop[i])), u.steps,
                                    np.abs(log_ratio(u.w_history[:, i], u.w_pop[i][None])))
            rival[label] = np.abs(np.log(w / other[i]))
    for key in ("iso", "n", "noniso", "whitened"):
        u = a.units[key]
        for c, i in configurations(u):
            excess[unit_label(c, key)] = u.loss_trained[i] / u.loss_pop[i] - 1
    what = (f"|log(w / w*)| per seed ({seeds_of(cells)} seeds), w the trained unit's, w* the population optimum of its "
            f"own setting, every isotropic, n-sweep and whitened-task unit configuration with optimal w >= "
            f"{cfg['regime_w']:g} ({len(cells)} configurations)")
    run.decide("trained-w-near-optimum", what + "; upper bound of the mean vs log 1.25", cells,
               source=BEYOND + " (the w training reaches against a direct scan of the population loss)")
    run.decide("trained-w-near-optimum-other-L", "control: the same units against the population optimum of the next "
               "L of their sweep (the previous L for the grid's last)", rival, source=BEYOND)
    run.decide("trained-loss-near-optimum", f"population loss of the trained unit over the best scanned M = w I "
               f"(isotropic) or w Sigma^-p (non-isotropic), minus 1, per seed ({seeds_of(excess)} seeds), every unit "
               f"configuration ({len(excess)}); upper bound of the mean vs 0.05", excess,
               source=BEYOND)


def check_covariance(run: Run, a: Analysis) -> None:
    """The covariance lemma on the whitened-task units (claim) and the book's non-isotropic units (finding), on two
    statistics per configuration; the rival is the isotropic direction I."""
    cfg = run.cfg
    for key, src in (
            ("whitened", "Collins et al. covariance lemma (slides' Lemma 1): x ~ Σ^(1/2) U^d ⇒ M* = w Σ^-1, "
                         "under symmetry"),
            ("noniso", BEYOND + " (the lemma outside its symmetry condition)")):
        u = a.units[key]
        cells, rival, none = {}, {}, []
        for c, i in configurations(u, lambda j: u.w_pop[j] >= cfg["regime_w"]):
            label = f"{c['function_class']}, L = {c['L']:g}"
            p = u.p_trained[i]
            cells[f"distance: {label}"] = followed(u.dist_cov[i], u.steps, u.dist_cov_history[:, i])
            rival[f"distance: {label}"] = u.dist_iso[i]
            if np.all(np.isfinite(p)):                 # else a diagonal of M <= 0: no exponent (the distance decides)
                cells[f"exponent: {label}"], rival[f"exponent: {label}"] = np.abs(p - 1), np.abs(p)
            else: none.append(label)  # noqa: E701
        what = (f"{SETTING_LABEL[SETTING_OF[key]]} inputs, every unit configuration with optimal w >= "
                f"{cfg['regime_w']:g} ({sum(k[:8] == 'distance' for k in cells)}), per seed ({seeds_of(cells)} seeds)"
                + (f"; no exponent (a diagonal of M <= 0) at {', '.join(none)}" if none else ""))
        run.decide(f"covariance-lemma-{key}", f"{what}: ||M/||M|| - Sigma^-1/||Sigma^-1|| ||_F and |p - 1| of the "
                   "fitted M ~ Sigma^-p; upper bounds of the means vs 0.1", cells, source=src)
        if key == "whitened":
            run.decide("covariance-lemma-whitened-identity", f"control: the same units against the isotropic direction "
                       f"I: ||M/||M|| - I/||I|| ||_F and |p| ({what})", rival, source=BEYOND)
    cells, costs = {}, []
    for key in ("whitened", "noniso"):
        u = a.units[key]
        for c, i in configurations(u, lambda j: u.w_pop[j] >= cfg["regime_w"]):
            if np.all(np.isfinite(u.p_trained[i])):   # a unit with a diagonal of M <= 0 has no exponent: left out
                cells[f"{SETTING_LABEL[SETTING_OF[key]]}: {c['function_class']}, L = {c['L']:g}"] = \
                    np.abs(u.p_trained[i] - u.p_star[i])
                costs.append(u.p_cost[i])
    costs = np.concatenate(costs)
    run.decide("covariance-exponent-matches-population", f"|p_trained - p*| per seed ({seeds_of(cells)} seeds), p the "
               "exponent of the trained M ~ Sigma^-p, p* the population-optimal one, every non-isotropic unit "
               f"configuration with optimal w >= {cfg['regime_w']:g}, both settings (population loss at the trained "
               f"exponent at most {100 * np.nanmax(costs):.1f}% above that at p*); upper bound of the mean vs 0.1",
               cells, source=BEYOND)
    run.record(covariance_exponent_cost=costs)


def check_block_form(run: Run, a: Analysis) -> None:
    """The rebuttal's block form and Lemma B.1's value row, on the trained full-weight units, against the same units
    at initialisation."""
    if a.block_history is None:
        raise ValueError("the full-weight units' result holds no weight history: train them through the notebook "
                         "(sweeps.FullWeights), which logs W_K, W_Q, W_V along training")
    cells, base, vx, vx0 = {}, {}, {}, {}
    # (units, final / initial / logged block form, label suffix): the chapter's d, then each further ambient d
    groups = [(a.units["full"], a.block, a.block_init, a.block_history, "")]
    for d, fd in a.full_more.items():
        if fd.block_history is None:
            raise ValueError(f"the full-weight units at d = {d} hold no weight history: train them through the "
                             "notebook (sweeps.FullWeights)")
        groups.append((fd, fd.block, fd.block_init, fd.block_history, f", d = {d}"))
    for u, b, b0, h, suffix in groups:
        for c, i in configurations(u):
            label = f"{c['function_class']}, L = {c['L']:g}{suffix}"
            w = defined(u.w[i], "full-weights-block-form", label)
            cells[f"label_row: {label}"] = followed(b.label_row_ratio[i], u.steps, h.label_row_ratio[:, i])
            cells[f"xblock: {label}"] = b.xblock_identity_distance[i]
            cells[f"value: {label}"] = np.abs(b.value_label[i] - 1)
            cells[f"w_factor: {label}"] = np.abs(np.log(w / u.w_pop[i]))
            base[f"label_row: {label}"] = b0.label_row_ratio[i]
            base[f"xblock: {label}"] = b0.xblock_identity_distance[i]
            base[f"value: {label}"] = np.abs(b0.value_label[i] - 1)
            vx[label] = followed(np.log(b.value_x_ratio[i]), u.steps, np.log(h.value_x_ratio[:, i]))
            vx0[label] = np.log(b0.value_x_ratio[i])
    dims = ", ".join(str(d) for d in sorted([run.cfg["d"], *a.full_more]))
    where = f" at d = {dims} (a cell without a d is at d = {run.cfg['d']})" if a.full_more else ""
    what = f"full W_K, W_Q, W_V units{where}, every configuration ({', '.join(vx)}), per seed ({seeds_of(vx)} seeds)"
    run.decide("full-weights-block-form", f"{what}: label-row mass / x-block mass of W_K^T W_Q, the x-block's "
               "distance from w I, |W_V's label weight - 1|, |log(w / w*)|; upper bounds of the means vs 0.1, 0.2, "
               "0.1, log 1.25", cells,
               source="Collins et al. rebuttal: 'We indeed observe this decomposition empirically' (x-block ≈ w I, "
                      "label row ≈ 0)")
    run.decide("full-weights-block-form-untrained", f"control: the same units at initialisation ({what}): the first "
               "three statistics", base, source=BASE)
    run.decide("full-weights-value-ignores-x", f"{what}: log(||v|| / |c|), v the covariate part and c the label weight "
               "of W_V's label row; upper bound of the mean vs log 0.1", vx,
               source="Collins et al. rebuttal (Lemma B.1): the optimal W_V 'leads to a prediction that ignores the "
                      "covariates'")
    run.decide("full-weights-value-ignores-x-untrained", f"control: the same units at initialisation ({what})", vx0,
               source=BASE)


def check_inner_dimension(run: Run, a: Analysis) -> None:
    """The rebuttal's inner dimension: per seed, the r x d units' M against the d x d units' seed-mean M of the same
    L, at every L with a window whose neighbour L (the rival) learns an M more than twice the threshold away."""
    inner, cfg = a.inner, run.cfg
    bar = 2 * design.load().entry(run.figure, "inner-dimension-same-M").test.threshold
    keep = [k for k, g in enumerate(inner.gap) if g > bar] if inner is not None else []
    if not keep:
        raise ValueError("the inner-dimension check needs the 'inner' sweep and at least one L of L_values whose "
                         f"population-optimal w is >= regime_w = {cfg['regime_w']} and whose neighbour L's M differs "
                         f"by more than {bar:g}")
    out = [f"{c} L = {L:g}" for k, (c, L) in enumerate(inner.keys) if k not in keep]
    label = {k: f"{inner.keys[k][0]}, L = {inner.keys[k][1]:g} (neighbour L = {inner.neighbour[k]:g})" for k in keep}
    spread = ", ".join(f"{inner.self_dist[k]:.3f}" for k in keep)
    what = (f"M_K, M_Q in R^({inner.r} x {cfg['d']}) against R^({cfg['d']} x {cfg['d']}), sigma = {cfg['sigma']:g}, "
            f"n = {cfg['n']}: ||M_r,s - mean_s M_d|| / ||mean_s M_d|| per seed ({inner.dist.shape[1]} seeds), every L "
            f"with optimal w >= {cfg['regime_w']:g} whose neighbour L's M differs by more than {bar:g} (left out: "
            f"{', '.join(out) or 'none'}; the d x d units' own seeds lie {spread} from their mean, by cell)")
    run.decide("inner-dimension-same-M", what + f"; seed mean followed at {len(inner.steps)} logged steps; upper "
               "bound of the mean vs 0.1", {label[k]: (inner.dist[k], inner.steps, inner.dist_history[:, k])
                                            for k in keep},
               source="Collins et al. rebuttal (global response, point 3): a larger inner dimension 'will not change "
                      "the optimal value of M'")
    run.decide("inner-dimension-same-M-next-L", "control: the same r x d units against the d x d units of the "
               "neighbouring L, per cell", {label[k]: inner.dist_next[k] for k in keep}, source=BASE)


def check_claims(run: Run, a: Analysis, t: Theorem34, big: TrainedLargeN, gain: Ordering, late: Ordering) -> None:
    run.titles.update(TITLES)
    check_trends(run, a)
    check_dynamics(run, a, gain, late)
    check_theorem34(run, a, t, big)
    check_window_limit(run, t)
    check_optimum(run, a)
    check_covariance(run, a)
    check_block_form(run, a)
    check_inner_dimension(run, a)
    check_tradeoff(run, a)
    run.record(**key_numbers(a))
