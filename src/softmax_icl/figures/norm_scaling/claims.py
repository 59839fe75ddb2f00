"""Claim checks of the norm-scaling figure (each computed from the analysis against a threshold fixed in advance)."""

from __future__ import annotations

import numpy as np

from ... import theory as th
from ...records import Run
from .analysis import (SETTING_LABEL, SETTING_OF, Analysis, L_over_sigma_pairs, L_trend, key_numbers, n_trend,
                       panels, sigma_trend)

# Thresholds of the claim checks (stated in each claim's text)
W_RATIO_TOL = 1.25          # trained w within this factor of the population optimum
LOSS_EXCESS_TOL = 0.05      # trained unit's population loss at most 5% above the best scanned
COV_DIST_TOL = 0.10         # ||M/||M|| - Sigma^-1/||Sigma^-1|| ||_F
COV_EXPONENT_TOL = 0.10     # |p - 1| for M ~ Sigma^-p, and |p_trained - p_population|
L_OVER_SIGMA_TOL = 0.05     # relative difference of trained w at equal L / sigma (ReLU)
BLOCK_TOL = {"label_row": 0.10, "xblock": 0.20, "value": 0.10}


def check_claims(run: Run, a: Analysis) -> None:
    cfg, units, fits = run.cfg, a.units, a.fits
    d = cfg["d"]
    # 1) ||M|| ends larger for larger L in every panel, up to the regime boundary
    worst, notes, beyond = np.inf, [], {}
    for key, cls in panels(a):
        t = L_trend(a, key, cls)
        r = t.ratios_in.min() if t.ratios_in.size else np.inf
        worst = min(worst, r)
        notes.append(f"{cls}/{SETTING_LABEL[SETTING_OF[key]]} up to L = {t.L[t.boundary]:g}")
        beyond[f"{cls}_{key}"] = {"boundary_L": t.L[t.boundary], "boundary_snr": t.snr_boundary,
                                  "norm_last_over_boundary": t.norm[-1] / t.norm[t.boundary],
                                  "pop_last_over_boundary": t.norm_pop[-1] / t.norm_pop[t.boundary]}
    run.check("norm-grows-with-L", "final ||M||_2 (seed mean) rises at every step of the L grid up to the regime "
              "boundary, in every panel (" + "; ".join(notes) + "); smallest ratio of consecutive norms",
              worst, worst > 1.0, "> 1")
    run.record(L_regime_boundaries=beyond)
    # 2) w falls as sigma grows (isotropic, each class), from the last saturated sigma upwards
    worst, notes = -np.inf, []
    for cls in cfg["classes"]:
        t = sigma_trend(a, cls)
        r = t.ratios_in.max() if t.ratios_in.size else -np.inf
        worst = max(worst, r)
        notes.append(f"{cls} from sigma = {t.sigma[t.boundary]:g}")
    run.check("w-falls-with-sigma", f"trained w (seed mean, L = {cfg['L_sigma']:g}) falls at every step of the "
              "sigma grid beyond the saturated end (" + "; ".join(notes) + "); largest ratio of consecutive w",
              worst, worst < 1.0, "< 1")
    # 3) w rises with n (ReLU)
    worst = min(n_trend(a, L).ratios.min() for L in cfg["n_sweep_L"])
    run.check("w-rises-with-n", f"trained w (ReLU, seed mean) rises at every step of n = {cfg['n_values']} for "
              f"L = {cfg['n_sweep_L']}; smallest ratio of consecutive w", worst, worst > 1.0, "> 1")
    # 4) fitted exponent against both versions of Theorem 3.4
    f = fits["snr"]
    if f.fit is not None:
        fit = f.fit
        lo_ci, hi_ci = fit.ci()
        for version in ("sketch", "slides"):
            lo, hi = f.ranges[version]
            ok = hi_ci >= lo and lo_ci <= hi
            run.check(f"exponent-in-{version}-range",
                      f"fitted exponent of trained w against n L^2/sigma^2 (ReLU, {f.n_points} units inside the "
                      f"regime; 95% CI [{lo_ci:.3f}, {hi_ci:.3f}]) overlaps the {version} range "
                      f"[{lo:.3f}, {hi:.3f}] for d = {d}", fit.slope, ok, "95% CI overlaps the range")
        run.record(exponent=fit.slope, exponent_se=fit.stderr, exponent_population=f.fit_pop.slope,
                   exponent_supported_by=th.which_version(fit.slope, d),
                   exponent_ranges={v: f.ranges[v] for v in th.THEOREM_34_VERSIONS})
    else:
        run.check("exponent-in-sketch-range", "fitted exponent against n L^2/sigma^2: fewer than two distinct "
                  "settings inside the regime", float("nan"), False, "at least 2 settings inside the regime")
    # 5) trained w close to the population optimum; trained loss close to the best scanned loss
    ratios, excess = [], []
    for key in ("iso", "n", "whitened"):
        u = units[key]
        ok = u.w_pop >= cfg["regime_w"]
        r = u.w[ok] / u.w_pop[ok]
        ratios.append(np.maximum(r, 1 / r))
    for key in ("iso", "n", "noniso", "whitened"):
        u = units[key]
        excess.append(u.loss_trained / u.loss_pop - 1)
    worst_ratio, worst_excess = np.concatenate(ratios).max(), np.concatenate(excess).max()
    run.check("trained-w-near-optimum", f"worst factor between trained w and the population-optimal w (isotropic "
              f"and whitened units with optimal w >= {cfg['regime_w']:g})", worst_ratio,
              worst_ratio <= W_RATIO_TOL, f"<= {W_RATIO_TOL}")
    run.check("trained-loss-near-optimum", "worst excess of a trained unit's population loss over the best scanned "
              "M = w I (isotropic) or w Sigma^-p (non-isotropic), every unit", worst_excess,
              worst_excess <= LOSS_EXCESS_TOL, f"<= {LOSS_EXCESS_TOL:.0%}")
    # 6) ReLU: w depends on L and sigma only through L / sigma
    pairs = L_over_sigma_pairs(a, "relu")
    if pairs:
        w = units["iso"].w
        rel = max(abs(w[i] - w[j]) / max(abs(w[i]), abs(w[j])) for i, j in pairs)
        run.check("relu-depends-on-L-over-sigma", f"ReLU: largest relative difference of trained w between "
                  f"{len(pairs)} pairs of units with equal L/sigma", rel, rel <= L_OVER_SIGMA_TOL,
                  f"<= {L_OVER_SIGMA_TOL}")
    # 7) covariance lemma
    for key, label in (("whitened", "tasks of the whitened input (lemma's symmetry holds)"),
                       ("noniso", "SPEC tasks, direction uniform in x (symmetry fails)")):
        u = units[key]
        ok = u.w_pop >= cfg["regime_w"]
        dist, dp = u.dist_cov[ok].max(), np.abs(u.p_trained[ok] - 1).max()
        run.check(f"covariance-lemma-{key}", f"M ∝ Sigma^-1 for {label}: largest ||M/||M|| - Sigma^-1/||Sigma^-1|| "
                  f"||_F over {int(ok.sum())} units with optimal w >= {cfg['regime_w']:g} (largest |p - 1| of "
                  f"M ~ Sigma^-p: {dp:.3f})", dist, dist <= COV_DIST_TOL and dp <= COV_EXPONENT_TOL,
                  f"<= {COV_DIST_TOL} and |p - 1| <= {COV_EXPONENT_TOL}")
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
              gap <= COV_EXPONENT_TOL, f"<= {COV_EXPONENT_TOL}")
    run.record(covariance_exponent_cost=costs)
    # 8) full W_K, W_Q, W_V: block form
    b = a.block
    uf = units["full"]
    row, xb, val = b.label_row_ratio.max(), b.xblock_identity_distance.max(), np.abs(b.value_label - 1).max()
    r = uf.w / uf.w_pop
    wr = np.maximum(r, 1 / r).max()
    run.check("full-weights-block-form", f"full W_K, W_Q, W_V: largest label-row mass / x-block mass of W_K^T W_Q "
              f"(x-block distance from w I: {xb:.3f}; |W_V label weight - 1|: {val:.3f}; factor to optimal w: "
              f"{wr:.3f})", row, row <= BLOCK_TOL["label_row"] and xb <= BLOCK_TOL["xblock"]
              and val <= BLOCK_TOL["value"] and wr <= W_RATIO_TOL,
              f"<= {BLOCK_TOL['label_row']}, x-block distance <= {BLOCK_TOL['xblock']}, |v - 1| <= "
              f"{BLOCK_TOL['value']}, factor <= {W_RATIO_TOL}")
    run.record(**key_numbers(a))
