"""Printed tables and computed conclusions of the norm-scaling figure."""

from __future__ import annotations

import numpy as np

from ... import theory as th
from .analysis import SETTING_LABEL, SETTING_OF, Analysis, L_trend, n_trend, panels, sigma_trend
from .dynamics import Growth, Ordering
from .theorem34 import Theorem34, TrainedLargeN


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
    lines.append("Log-log slopes of trained w inside the chosen regime (ReLU, isotropic; descriptive, not a check)")
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


VERSIONS = ("slides", "sphere", "sketch")


def theorem34_table(t: Theorem34) -> str:
    """The local exponent d log w*/d log s of the population optimum at s = n L^2/sigma^2, per d, n and L/sigma."""
    lines = ["Local exponent d log w*/d log s of the population-optimal w (ReLU), read at s = n L²/σ²",
             "  ranges: " + "; ".join(f"d = {d}: slides [{1 / d:.3f}, {2 / d:.3f}], sphere [{1 / (d + 1):.3f}, "
                                      f"{2 / (d + 1):.3f}], sketch [{1 / (d + 2):.3f}, {2 / (d + 2):.3f}]"
                                      for d in t.ds)]
    for rho in t.rhos:
        lines.append(f"  L/σ = {rho ** 0.5:g}" + ("  (the chapter's L/σ; the checks read this row)"
                                                  if rho == t.rho_check else ""))
        lines.append(f"    {'n':>8}" + "".join(f"{f'd = {d}':>10}" for d in t.ds))
        for n in t.ns:
            lines.append(f"    {n:>8}" + "".join(f"{t.exponent[(d, n, rho)]:>10.3f}" for d in t.ds))
    lines.append("  noiseless saturation w_sat = argmin_w bias(w):")
    for d in t.ds:
        lines.append(f"    d = {d}: " + ", ".join(f"n = {n}: {t.curves[(d, n)].w_sat:.3g}" for n in t.ns))
    return "\n".join(lines)


def _where(e: float, d: int) -> str:
    inside = [v for v in VERSIONS if th.theorem34_exponents(d, v)[0] <= e <= th.theorem34_exponents(d, v)[1]]
    return ("inside the " + ", ".join(inside) + " range" + ("s" if len(inside) > 1 else "")) if inside \
        else "outside all three ranges"


def theorem34_conclusion(t: Theorem34) -> str:
    """Where the exponent goes as n grows, for each d, computed from the table (no regime cut-off)."""
    rho, ns = t.rho_check, t.ns
    lines = [f"At L/σ = {rho ** 0.5:g} (the chapter's setting), as n grows from {ns[0]} to {ns[-1]}:"]
    for d in t.ds:
        e = [t.exponent[(d, n, rho)] for n in ns]
        steps = np.diff(e)
        trend = "falls at every step" if np.all(steps < 0) else "rises at every step" if np.all(steps > 0) else \
            f"moves non-monotonically (steps {', '.join(f'{x:+.3f}' for x in steps)})"
        lines.append(f"  d = {d}: the exponent {trend}, {e[0]:.3f} -> {e[-1]:.3f} (last step {steps[-1]:+.3f}); "
                     f"at n = {ns[-1]} it is {_where(e[-1], d)}.")
    lines.append("Across L/σ at the largest n:")
    for d in t.ds:
        vals = [t.exponent[(d, ns[-1], r)] for r in t.rhos]
        lines.append(f"  d = {d}: " + ", ".join(f"L/σ = {r ** 0.5:g}: {v:.3f}" for r, v in zip(t.rhos, vals)))
    return "\n".join(lines)


def noise_table(t: Theorem34) -> str:
    lines = ["Noise term n E[Σ a_i²] against w (inputs on S^(d-1)): fitted exponent over w in [30, 300]"]
    for d in t.ds:
        z = t.noise[d]
        lines.append(f"  d = {d}: closed form (n -> inf) {z.exponent:.3f}; Monte Carlo at n = {z.n} "
                     + (f"{z.exponent_mc:.3f}" if np.isfinite(z.exponent_mc) else "(too few w with 1/E[Σa²] >= 100)")
                     + f"; largest |MC / closed form - 1| where 1/E[Σa²] >= 100: {z.mc_max_rel_dev:.3f}; "
                     f"sketch d/2 = {d / 2:g}, sphere (d-1)/2 = {(d - 1) / 2:g}")
    return "\n".join(lines)


def trained_large_n_table(big: TrainedLargeN) -> str:
    lines = ["Trained ReLU units at large n against the population curve of their own (d, n, s)"]
    for i, c in enumerate(big.configs):
        lines.append(f"  d = {big.d[i]}, n = {c['n']}, L = {c['L']:g}, seed {c['seed']}: trained w = {big.w[i]:.3g} "
                     f"(residual from w I {big.resid[i]:.3f}), optimum {big.w_pop[i]:.3g}, optimum of the other L "
                     f"{big.w_pop_other[i]:.3g}")
    return "\n".join(lines)


def dynamics_table(growths: list[Growth], early: Ordering, late: Ordering) -> str:
    lines = ["Growth of ||M||_2: slope of log ||M||_2 per 1000 steps, early (first part) and late (last quarter), "
             "seed mean; steps to half the final norm"]
    lines.append(f"  {'panel':<28}" + "".join(f"{f'L = {L:g}':>11}" for L in early.L))
    for (setting, cls), tab in early.by_panel.items():
        lines.append(f"  {cls + ', ' + setting + ' early':<28}" + "".join(f"{1000 * v:>11.2f}" for v in
                                                                            np.nanmean(tab, 0)))
        lines.append(f"  {cls + ', ' + setting + ' late':<28}" + "".join(
            f"{1000 * v:>11.2f}" for v in np.nanmean(late.by_panel[(setting, cls)], 0)))
    for g in growths:
        for cls in sorted({c["function_class"] for c in g.configs}):
            th_ = [np.nanmean([g.t_half[i] for i, c in enumerate(g.configs) if c["function_class"] == cls
                               and c["L"] == L]) for L in early.L]
            lines.append(f"  {cls + ', ' + g.setting + ' t_half':<28}" + "".join(f"{v:>11.0f}" for v in th_))
    lines.append(f"  smallest early step between consecutive L: {1000 * early.worst_step:.3f} per 1000 steps "
                 f"({early.worst_where})")
    return "\n".join(lines)
