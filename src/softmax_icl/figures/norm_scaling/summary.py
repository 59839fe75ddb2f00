"""Printed tables and computed conclusions of the norm-scaling figure."""

from __future__ import annotations

import numpy as np

from ... import theory as th
from .analysis import SETTING_LABEL, SETTING_OF, Analysis, L_trend, n_trend, panels, sigma_trend


def _row_fmt(vals, width=7) -> str:
    return "".join(f"{v:>{width}.3g}" for v in vals)


def key_numbers_table(a: Analysis) -> str:
    cfg, units = a.cfg, a.units
    Ls = cfg["L_values"]
    lines = [f"Final ||M||_2 (seed mean; trained / population optimum), n = {cfg['n']}, sigma = {cfg['sigma']:g}",
             f"{'L':<28}" + _row_fmt(Ls)]
    for key, cls in panels(a):
        t = L_trend(a, key, cls)
        name = f"{cls}, {SETTING_LABEL['isotropic' if key == 'iso' else 'nonisotropic']}"
        lines.append(f"{name + ' trained':<28}" + _row_fmt(t.norm))
        lines.append(f"{name + ' optimum':<28}" + _row_fmt(t.norm_pop))
        lines.append(f"{'':<28}regime boundary L = {t.L[t.boundary]:g} (n L^2/sigma^2 = {t.snr_boundary:.3g})")
    lines.append("")
    lines.append(f"Trained w against sigma (L = {cfg['L_sigma']:g}, n = {cfg['n']})")
    lines.append(f"{'sigma':<28}" + _row_fmt(cfg["sigma_values"]))
    for cls in cfg["classes"]:
        t = sigma_trend(a, cls)
        lines.append(f"{cls + ' trained':<28}" + _row_fmt(t.w))
        lines.append(f"{cls + ' optimum':<28}" + _row_fmt(t.w_pop))
    lines.append(f"Trained w against n (ReLU, sigma = {cfg['sigma']:g})")
    lines.append(f"{'n':<28}" + _row_fmt(cfg["n_values"]))
    for L in cfg["n_sweep_L"]:
        t = n_trend(a, L)
        lines.append(f"{f'L = {L:g} trained':<28}" + _row_fmt(t.w))
        lines.append(f"{f'L = {L:g} optimum':<28}" + _row_fmt(t.w_pop))
    lines.append("")
    lines.append("Population curves (ReLU): theory regime in n L^2/sigma^2 and noiseless saturation of w")
    for n, c in a.curves.items():
        lo, hi = c.bounds
        fit = c.fit
        lines.append(f"  n = {n:<5} regime s in [{lo:.3g}, {hi:.3g}], w_sat = {c.w_sat:.3g}, population exponent "
                     f"in regime = {fit.slope:.3f}" if fit else f"  n = {n:<5} no regime")
    lines.append("")
    lines.append("Log-log slopes of trained w inside the regime (ReLU, isotropic)")
    lines.append(f"  {'against':<10}{'units':>6}{'slope':>8}{'± s.e.':>8}{'optimum':>9}   sketch range    slides range")
    for k, f in a.fits.items():
        rs, rl = f.ranges["sketch"], f.ranges["slides"]
        if f.fit is None:
            lines.append(f"  {k:<10}{f.n_points:>6}   (too few settings inside the regime)")
            continue
        lines.append(f"  {k:<10}{f.n_points:>6}{f.fit.slope:>8.3f}{f.fit.stderr:>8.3f}"
                     f"{f.fit_pop.slope:>9.3f}   [{rs[0]:.3f}, {rs[1]:.3f}]  [{rl[0]:.3f}, {rl[1]:.3f}]")
    lines.append("")
    lines.append("Covariance lemma: distance of normalised M to Sigma^-1 and to I, exponent p of M ~ Sigma^-p")
    for key in ("noniso", "whitened"):
        u = units[key]
        for cls in cfg["classes"]:
            idx = [i for i, c in enumerate(u.configs) if c["function_class"] == cls and c["seed"] == 0]
            for i in idx:
                c = u.configs[i]
                lines.append(f"  {SETTING_LABEL[SETTING_OF[key]]:<31}{cls:<7}L = {c['L']:<6g} d(Sigma^-1) = "
                             f"{u.dist_cov[i]:.3f}  d(I) = {u.dist_iso[i]:.3f}  p = {u.p_trained[i]:.2f}  "
                             f"p* = {u.p_star[i]:.2f}")
    lines.append("")
    b = a.block
    lines.append("Full W_K, W_Q, W_V: block form of W_K^T W_Q and the label row of W_V")
    for i, c in enumerate(units["full"].configs):
        lines.append(f"  {c['function_class']:<7}L = {c['L']:<5g} seed {c['seed']}: w = {b.w[i]:.3g} "
                     f"(optimum {units['full'].w_pop[i]:.3g}), x-block distance from w I = "
                     f"{b.xblock_identity_distance[i]:.3f}, label row / x-block = {b.label_row_ratio[i]:.3f}, "
                     f"label column / x-block = {b.label_col_ratio[i]:.3f}, W_V label weight = "
                     f"{b.value_label[i]:.3f}")
    return "\n".join(lines)


def _versions_text(slope: float, d: int) -> str:
    v = th.which_version(slope, d)
    return {0: "neither range", 1: f"only the {v[0] if v else ''} range", 2: "both ranges"}[len(v)]


def exponent_summary(a: Analysis) -> str:
    """Which version of Theorem 3.4 the fitted exponents support, computed from the fits."""
    d, f = a.cfg["d"], a.fits["snr"]
    lines = []
    for v in ("sketch", "slides"):
        lo, hi = th.theorem34_exponents(d, v)
        lines.append(f"{v:>7} version: w between (n L²/σ²)^{lo:.3f} and (n L²/σ²)^{hi:.3f}  (d = {d})")
    if f.fit is None:
        return "\n".join(lines + ["Too few trained settings inside the regime to fit an exponent."])
    fit = f.fit
    lo_ci, hi_ci = fit.ci()
    lines.append(f"Trained units inside the regime ({f.n_points}): exponent {fit.slope:.3f}, 95% CI "
                 f"[{lo_ci:.3f}, {hi_ci:.3f}] -> in {_versions_text(fit.slope, d)}")
    lines.append(f"Population optimum at the same settings: exponent {f.fit_pop.slope:.3f} -> in "
                 f"{_versions_text(f.fit_pop.slope, d)}")
    for n, c in a.curves.items():
        if c.fit is not None:
            lines.append(f"Population optimum, n = {n}, whole regime: exponent {c.fit.slope:.3f} -> in "
                         f"{_versions_text(c.fit.slope, d)}")
    sup = th.which_version(fit.slope, d)
    if len(sup) == 1:
        lines.append(f"The data support the {sup[0]} version (its range contains the fitted exponent; the other's "
                     "does not).")
    elif len(sup) == 2:
        lines.append("The fitted exponent lies where the two ranges overlap: the data do not separate them.")
    else:
        lines.append("The fitted exponent lies outside both ranges.")
    return "\n".join(lines)


def covariance_summary(a: Analysis) -> str:
    """Median over units inside the window regime of the covariance measurements, per setting."""
    cfg = a.cfg
    lines = []
    for key in ("noniso", "whitened"):
        u = a.units[key]
        ok = u.w_pop >= cfg["regime_w"]
        lines.append(f"{SETTING_LABEL[SETTING_OF[key]]:<31}: {int(ok.sum())} units with optimal w >= "
                     f"{cfg['regime_w']:g}; median distance to Σ⁻¹ {np.median(u.dist_cov[ok]):.3f} (to I "
                     f"{np.median(u.dist_iso[ok]):.3f}); median exponent p of M ~ Σ^-p: trained "
                     f"{np.nanmedian(u.p_trained[ok]):.2f}, population optimum {np.median(u.p_star[ok]):.2f}; "
                     f"population loss at p = 1 over the best p: "
                     f"+{100 * np.median(u.loss_pop_p1[ok] / u.loss_pop[ok] - 1):.1f}% (median)")
    return "\n".join(lines)

