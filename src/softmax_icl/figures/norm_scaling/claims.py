"""Checks of the norm-scaling figure: each computed from the analysis against a threshold fixed before the runs,
with its kind (claim / finding / control) and its source."""

from __future__ import annotations

import numpy as np

from ... import theory as th
from ...records import Run
from .analysis import (SETTING_LABEL, SETTING_OF, Analysis, L_trend, key_numbers, n_trend, panels, sigma_trend,
                       w_pop_other_L)
from .dynamics import Ordering
from .theorem34 import Theorem34, TrainedLargeN

# Thresholds (stated in each check's text)
W_RATIO_TOL = 1.25          # trained w within this factor of the population optimum
LOSS_EXCESS_TOL = 0.05      # trained unit's population loss at most 5% above the best scanned
COV_DIST_TOL = 0.10         # ||M/||M|| - Sigma^-1/||Sigma^-1|| ||_F
COV_EXPONENT_TOL = 0.10     # |p - 1| for M ~ Sigma^-p, and |p_trained - p_population|
BLOCK_TOL = {"label_row": 0.10, "xblock": 0.20, "value": 0.10}
NOISE_EXPONENT_TOL = 0.25   # half the distance between the two hypotheses d/2 and (d-1)/2: nearest one wins
NOISE_MC_TOL = 0.10         # MC n E[sum a^2] within 10% of the n -> inf closed form where n_eff >= 100

SRC_FIG3 = "Collins et al. Fig. 3 (slides 'Empirical scaling of ||M|| with L')"
SRC_THM = "Collins et al. Theorem 3.4 (slides' Theorem 2)"
BEYOND = "beyond the papers"


def _ratio(w, w_ref):
    r = np.asarray(w) / np.asarray(w_ref)
    return np.maximum(r, 1 / r)


def check_trends(run: Run, a: Analysis) -> None:
    """Figure 3's final norms and the theorem's directions (L, sigma, n)."""
    cfg = run.cfg
    worst, notes, beyond = np.inf, [], {}
    for key, cls in panels(a):
        t = L_trend(a, key, cls)
        r = t.ratios_in.min() if t.ratios_in.size else np.inf
        worst = min(worst, r)
        notes.append(f"{cls}/{SETTING_LABEL[SETTING_OF[key]]} up to L = {t.L[t.boundary]:g}")
        beyond[f"{cls}_{key}"] = {"boundary_L": t.L[t.boundary], "boundary_snr": t.snr_boundary,
                                  "norm_last_over_boundary": t.norm[-1] / t.norm[t.boundary],
                                  "pop_last_over_boundary": t.norm_pop[-1] / t.norm_pop[t.boundary]}
    run.check("norm-grows-with-L", "final ||M||_2 (seed mean) rises at every step of the L grid up to the point where "
              "the population optimum saturates, in every panel (" + "; ".join(notes) + "); smallest ratio of "
              "consecutive norms", worst, worst > 1.0, "> 1", kind="claim",
              source=SRC_FIG3 + ": ||M|| ends larger for larger L, ReLU and cosine, isotropic and non-isotropic")
    run.record(L_regime_boundaries=beyond)
    worst, notes = -np.inf, []
    for cls in cfg["classes"]:
        t = sigma_trend(a, cls)
        r = t.ratios_in.max() if t.ratios_in.size else -np.inf
        worst = max(worst, r)
        notes.append(f"{cls} from sigma = {t.sigma[t.boundary]:g}")
    run.check("w-falls-with-sigma", f"trained w (seed mean, L = {cfg['L_sigma']:g}) falls at every step of the "
              "sigma grid beyond the saturated end (" + "; ".join(notes) + "); largest ratio of consecutive w",
              worst, worst < 1.0, "< 1", kind="claim", source=SRC_THM + ": w shrinks with sigma (sigma -> inf: w -> 0)")
    worst = min(n_trend(a, L).ratios.min() for L in cfg["n_sweep_L"])
    run.check("w-rises-with-n", f"trained w (ReLU, seed mean) rises at every step of n = {cfg['n_values']} for "
              f"L = {cfg['n_sweep_L']}; smallest ratio of consecutive w", worst, worst > 1.0, "> 1", kind="claim",
              source=SRC_THM + ": w grows with n (n -> inf: w -> inf)")


def check_dynamics(run: Run, early: Ordering, late: Ordering) -> None:
    cfg = run.cfg
    run.check("growth-rate-orders-with-L", f"growth rate of ||M||_2 (slope of log ||M||_2 over the first "
              f"{cfg['dyn_early']:.0%} of {cfg['dyn_steps']} Adam steps at lr {cfg['dyn_lr']:g} from init scale "
              f"{cfg['dyn_init']:g}) rises with L = {cfg['dyn_L']} in every panel and for every seed; smallest step "
              f"between consecutive L (per step; at {early.worst_where})", early.worst_step, early.worst_step > 0,
              "> 0", kind="claim", source=SRC_FIG3 + ": ||M|| 'grows faster during pretraining with larger L'")
    run.check("growth-rate-orders-with-L-late", "control: the same ordering of the slope of log ||M||_2 over the "
              f"last quarter of training, after the norms have settled (at {late.worst_where})", late.worst_step,
              late.worst_step > 0, "> 0 (must fail)", kind="control", source=BEYOND,
              control_of="growth-rate-orders-with-L")


def check_theorem34(run: Run, t: Theorem34, big: TrainedLargeN) -> None:
    cfg = run.cfg
    n_max, rho = t.ns[-1], t.rho_check
    lsig = cfg["L_sigma"] / cfg["sigma"]
    e = {d: t.exponent[(d, n_max, rho)] for d in t.ds}
    etxt = ", ".join(f"d = {d}: {e[d]:.3f}" for d in t.ds)
    for version, kind, src in (
            ("slides", "claim", SRC_THM + ": Omega((nL²/σ²)^{1/d}) < w < O((nL²/σ²)^{2/d}) for sufficiently large n"),
            ("sketch", "finding", "the slides' proof sketch (noise term Θ(σ² w^{d/2}/n), bias between L²/w² and "
                                  "L²/w), carried to its range [1/(d+2), 2/(d+2)] by the book"),
            ("sphere", "finding", "the sketch with the noise term of inputs on S^{d-1}, w^{(d-1)/2}: range "
                                  "[1/(d+1), 2/(d+1)] (derived by the book)")):
        rng = {d: th.theorem34_exponents(d, version) for d in t.ds}
        margin = min(min(e[d] - rng[d][0], rng[d][1] - e[d]) for d in t.ds)
        rtxt = ", ".join(f"[{rng[d][0]:.3f}, {rng[d][1]:.3f}]" for d in t.ds)
        run.check(f"theorem34-{version}-range", f"local exponent d log w*/d log s of the population optimum (ReLU) at "
                  f"n = {n_max}, L/sigma = {lsig:g} ({etxt}) inside the {version} range ({rtxt}) for every d; "
                  "smallest distance to a range edge (negative: outside)", margin, margin >= 0, ">= 0",
                  kind=kind, source=src)
    # control: each d's exponent against the slides range of the next d
    ds = list(t.ds)
    rng = {d: th.theorem34_exponents(d, "slides") for d in ds}
    pairs = [(d, ds[(i + 1) % len(ds)]) for i, d in enumerate(ds)]
    margin = min(min(e[d] - rng[o][0], rng[o][1] - e[d]) for d, o in pairs)
    run.check("theorem34-slides-range-other-d", "control: the exponent of each d against the slides range of "
              "another d (" + ", ".join(f"{d} vs {o}" for d, o in pairs) + "); smallest distance to a range edge",
              margin, margin >= 0, ">= 0 (must fail)", kind="control", source=BEYOND,
              control_of="theorem34-slides-range")
    # the noise term
    k = {d: t.noise[d].exponent for d in t.ds}
    dev = max(t.noise[d].mc_max_rel_dev for d in t.ds)
    ktxt = ", ".join(f"d = {d}: {k[d]:.3f}" for d in t.ds)
    gap_half = max(abs(k[d] - d / 2) for d in t.ds)
    gap_sphere = max(abs(k[d] - (d - 1) / 2) for d in t.ds)
    run.check("noise-term-exponent-d-over-2", f"exponent of n E[sum_i a_i^2] against w over w in "
              f"[30, 300] (n -> inf closed form on S^(d-1), matching the Monte Carlo at n = {n_max} within "
              f"{dev:.1%} where 1/E[sum a^2] >= 100; {ktxt}) within {NOISE_EXPONENT_TOL} of d/2 for every d; "
              "largest |k - d/2|", gap_half, gap_half <= NOISE_EXPONENT_TOL, f"<= {NOISE_EXPONENT_TOL}",
              kind="claim", source="Collins et al. slides, proof sketch: L_noise = Θ(σ² (w^{d/2} + 1) / n)")
    run.check("noise-term-exponent-sphere", f"the same exponent within {NOISE_EXPONENT_TOL} of (d-1)/2 for every d, "
              f"and the closed form within {NOISE_MC_TOL:.0%} of the Monte Carlo; largest |k - (d-1)/2|", gap_sphere,
              gap_sphere <= NOISE_EXPONENT_TOL and dev <= NOISE_MC_TOL, f"<= {NOISE_EXPONENT_TOL}", kind="finding",
              source=BEYOND + " (SPEC 1.4: the noise term on the sphere grows like w^{(d-1)/2})")
    # trained units at the largest n against the population curve
    wr, wo = _ratio(big.w, big.w_pop).max(), _ratio(big.w, big.w_pop_other).min()
    dtxt = ", ".join(f"d = {d}" for d in t.ds)
    run.check("theorem34-trained-large-n", f"trained ReLU units at n = {cfg['t34_train_n']} ({dtxt}; L = "
              f"{cfg['t34_train_L']}, sigma = {cfg['sigma']:g}; {len(big.w)} units): worst factor between trained w "
              "and the population optimum of its own (d, n, s)", wr, wr <= W_RATIO_TOL, f"<= {W_RATIO_TOL}",
              kind="finding", source=BEYOND + " (the population curves of Theorem 3.4 against training)")
    run.check("theorem34-trained-large-n-other-L", "control: the same units against the population optimum of the "
              "other L of the sweep; best factor", wo, wo <= W_RATIO_TOL, f"<= {W_RATIO_TOL} (must fail)",
              kind="control", source=BEYOND, control_of="theorem34-trained-large-n")
    run.record(theorem34_exponent={f"d{d}": {f"n{n}": {f"rho{r:g}": t.exponent[(d, n, r)] for r in t.rhos}
                                             for n in t.ns} for d in t.ds},
               noise_exponent={f"d{d}": {"closed_form": t.noise[d].exponent, "monte_carlo": t.noise[d].exponent_mc,
                                         "mc_max_rel_dev": t.noise[d].mc_max_rel_dev} for d in t.ds},
               trained_large_n={"w": big.w, "w_population": big.w_pop, "w_population_other_L": big.w_pop_other})


def check_optimum(run: Run, a: Analysis) -> None:
    """Trained units against the population optimum of their own setting (and, as control, of another L)."""
    cfg, units = run.cfg, a.units
    ratios, excess, other = [], [], []
    for key in ("iso", "n", "whitened"):
        u = units[key]
        ok = u.w_pop >= cfg["regime_w"]
        ratios.append(_ratio(u.w[ok], u.w_pop[ok]))
        if key != "whitened":
            other.append(_ratio(u.w[ok], w_pop_other_L(a, key)[ok]))
    for key in ("iso", "n", "noniso", "whitened"):
        u = units[key]
        excess.append(u.loss_trained / u.loss_pop - 1)
    worst_ratio, worst_excess = np.concatenate(ratios).max(), np.concatenate(excess).max()
    worst_other = np.concatenate(other).max()
    run.check("trained-w-near-optimum", f"worst factor between trained w and the population-optimal w (isotropic "
              f"and whitened units with optimal w >= {cfg['regime_w']:g})", worst_ratio,
              worst_ratio <= W_RATIO_TOL, f"<= {W_RATIO_TOL}", kind="finding",
              source=BEYOND + " (SPEC 1.4: the w training reaches against a direct scan of the population loss)")
    run.check("trained-w-near-optimum-other-L", "control: the isotropic units against the population-optimal w of "
              "the next L of their sweep; worst factor", worst_other, worst_other <= W_RATIO_TOL,
              f"<= {W_RATIO_TOL} (must fail)", kind="control", source=BEYOND, control_of="trained-w-near-optimum")
    run.check("trained-loss-near-optimum", "worst excess of a trained unit's population loss over the best scanned "
              "M = w I (isotropic) or w Sigma^-p (non-isotropic), every unit", worst_excess,
              worst_excess <= LOSS_EXCESS_TOL, f"<= {LOSS_EXCESS_TOL:.0%}", kind="finding", source=BEYOND)


def check_covariance(run: Run, a: Analysis) -> None:
    cfg, units = run.cfg, a.units
    for key, label, kind, src in (
            ("whitened", "tasks of the whitened input (lemma's symmetry holds)", "claim",
             "Collins et al. covariance lemma (slides' Lemma 1): x ~ Σ^{1/2} U^d ⇒ M* = w Σ^{-1}, under symmetry"),
            ("noniso", "SPEC tasks, direction uniform in x (symmetry fails)", "finding",
             BEYOND + " (the lemma outside its symmetry condition)")):
        u = units[key]
        ok = u.w_pop >= cfg["regime_w"]
        dist, dp = u.dist_cov[ok].max(), np.abs(u.p_trained[ok] - 1).max()
        run.check(f"covariance-lemma-{key}", f"M ∝ Sigma^-1 for {label}: largest ||M/||M|| - Sigma^-1/||Sigma^-1|| "
                  f"||_F over {int(ok.sum())} units with optimal w >= {cfg['regime_w']:g} (largest |p - 1| of "
                  f"M ~ Sigma^-p: {dp:.3f})", dist, dist <= COV_DIST_TOL and dp <= COV_EXPONENT_TOL,
                  f"<= {COV_DIST_TOL} and |p - 1| <= {COV_EXPONENT_TOL}", kind=kind, source=src)
    u = units["whitened"]
    ok = u.w_pop >= cfg["regime_w"]
    di = u.dist_iso[ok].min()
    run.check("covariance-lemma-whitened-identity", "control: the same whitened-task units against the isotropic "
              "direction I; smallest ||M/||M|| - I/||I|| ||_F", di, di <= COV_DIST_TOL, f"<= {COV_DIST_TOL} (must fail)",
              kind="control", source=BEYOND, control_of="covariance-lemma-whitened")
    gaps, costs, where = [], [], []
    for key in ("whitened", "noniso"):
        u = units[key]
        ok = np.nonzero(u.w_pop >= cfg["regime_w"])[0]
        gaps.append(np.abs(u.p_trained[ok] - u.p_star[ok]))
        costs.append(u.p_cost[ok])
        where += [f"{u.configs[i]['function_class']} L = {u.configs[i]['L']:g}" for i in ok]
    gaps, costs = np.concatenate(gaps), np.concatenate(costs)
    gap = gaps.max()
    bad = sorted({w for w, g in zip(where, gaps) if g > COV_EXPONENT_TOL})
    run.check("covariance-exponent-matches-population", "largest |p_trained - p*| between the exponent of the "
              "trained M ~ Sigma^-p and the population-optimal exponent, both non-isotropic settings, units with "
              f"optimal w >= {cfg['regime_w']:g} (beyond tolerance: {', '.join(bad) or 'none'}; population loss at "
              f"the trained exponent exceeds that at p* by at most {100 * np.nanmax(costs):.1f}%)", gap,
              gap <= COV_EXPONENT_TOL, f"<= {COV_EXPONENT_TOL}", kind="finding", source=BEYOND)
    run.record(covariance_exponent_cost=costs)


def check_block_form(run: Run, a: Analysis) -> None:
    b, uf = a.block, a.units["full"]
    row, xb, val = b.label_row_ratio.max(), b.xblock_identity_distance.max(), np.abs(b.value_label - 1).max()
    wr = _ratio(uf.w, uf.w_pop).max()
    run.check("full-weights-block-form", f"full W_K, W_Q, W_V: largest label-row mass / x-block mass of W_K^T W_Q "
              f"(x-block distance from w I: {xb:.3f}; |W_V label weight - 1|: {val:.3f}; factor to optimal w: "
              f"{wr:.3f})", row, row <= BLOCK_TOL["label_row"] and xb <= BLOCK_TOL["xblock"]
              and val <= BLOCK_TOL["value"] and wr <= W_RATIO_TOL,
              f"<= {BLOCK_TOL['label_row']}, x-block distance <= {BLOCK_TOL['xblock']}, |v - 1| <= "
              f"{BLOCK_TOL['value']}, factor <= {W_RATIO_TOL}", kind="claim",
              source="Collins et al. rebuttal: trained W_K^T W_Q takes the block form (x-block ≈ w I, label row ≈ 0)")


def check_claims(run: Run, a: Analysis, t: Theorem34, big: TrainedLargeN, early: Ordering, late: Ordering) -> None:
    check_trends(run, a)
    check_dynamics(run, early, late)
    check_theorem34(run, t, big)
    check_optimum(run, a)
    check_covariance(run, a)
    check_block_form(run, a)
    run.record(**key_numbers(a))
