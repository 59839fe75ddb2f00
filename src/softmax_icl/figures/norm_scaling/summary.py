"""The norm-scaling chapter's tables and computed conclusions, as MyST markdown
(``chapter.show(summary.key_numbers_table(result))``).

Numbers are rounded as they were printed (not compared character by character: nbval checks only the verdicts).
"""

from __future__ import annotations

import re

import numpy as np

from ... import theory as th
from ...book.chapter import table
from .analysis import SETTING_LABEL, SETTING_OF, Analysis
from .dynamics import Growth, Ordering
from .theorem34 import NEFF_MIN, NOISE_FIT_W, Theorem34, TrainedLargeN, jackknife_se
from .trends import L_trend, n_trend, panels, sigma_trend

NORM = "$\\lVert M\\rVert_2$"
#: the variables of the slope fits, as maths
EXPONENT = "$\\mathrm{d} \\log w^* / \\mathrm{d} \\log s$"
VARIABLE = {"L": "$L$", "sigma": "$\\sigma$", "n": "$n$", "snr": "$s = nL^2/\\sigma^2$"}


def _g(x: float) -> str:
    return f"{x:.3g}"


def _pair(trained: float, optimum: float) -> str:
    """A trained value with its population optimum in brackets."""
    return f"{_g(trained)} ({_g(optimum)})"


def _arrow(text: str) -> str:
    """``L = 1 -> 3`` as ``$L = 1 \\to 3$``."""
    return re.sub(r"\bL = (\S+) -> (\S+)", r"$L = \1 \\to \2$", text)


def _panel(key: str, cls: str) -> str:
    return f"{cls}, {SETTING_LABEL['isotropic' if key == 'iso' else 'nonisotropic']}"


def key_numbers_table(a: Analysis) -> str:
    """The numbers behind the claims, one table per block: the norm against L per panel, w against sigma and
    against n, the log-log slopes, the covariance lemma per input setting, the full-weight units."""
    cfg, units = a.cfg, a.units
    out = []

    trends = [(key, cls, L_trend(a, key, cls)) for key, cls in panels(a)]
    rows = [[f"{L:g}"] + [_pair(t.norm[i], t.norm_pop[i]) for _, _, t in trends] for i, L in enumerate(cfg["L_values"])]
    rows.append(["regime boundary"] + [f"$L = {t.L[t.boundary]:g}$ ({t.snr_boundary:.3g})" for _, _, t in trends])
    out.append(table(["$L$"] + [_panel(key, cls) for key, cls, _ in trends], rows,
                     title=f"Final {NORM} against $L$: trained (population optimum), $n = {cfg['n']}$, "
                           f"$\\sigma = {cfg['sigma']:g}$", folded=len(rows) > 8,
                     note="Seed means. Last row: the first $L$ at which the population-optimal window saturates, "
                          "with its $nL^2/\\sigma^2$ in brackets."))

    trends = [(cls, sigma_trend(a, cls)) for cls in cfg["classes"]]
    rows = [[f"{s:g}"] + [_pair(t.w[i], t.w_pop[i]) for _, t in trends] for i, s in enumerate(cfg["sigma_values"])]
    out.append(table(["$\\sigma$"] + [cls for cls, _ in trends], rows,
                     title=f"Trained $w$ against $\\sigma$ (population optimum), $L = {cfg['L_sigma']:g}$, "
                           f"$n = {cfg['n']}$", folded=len(rows) > 8, note="Seed means; isotropic inputs."))

    trends = [(L, n_trend(a, L)) for L in cfg["n_sweep_L"]]
    rows = [[str(n)] + [_pair(t.w[i], t.w_pop[i]) for _, t in trends] for i, n in enumerate(cfg["n_values"])]
    out.append(table(["$n$"] + [f"$L = {L:g}$" for L, _ in trends], rows,
                     title=f"Trained $w$ against $n$ (population optimum), ReLU, $\\sigma = {cfg['sigma']:g}$",
                     folded=len(rows) > 8, note="Seed means; isotropic inputs."))

    rows = []
    for k, f in a.fits.items():
        rs, rl = f.ranges["sketch"], f.ranges["slides"]
        ranges = [f"[{rs[0]:.3f}, {rs[1]:.3f}]", f"[{rl[0]:.3f}, {rl[1]:.3f}]"]
        if f.fit is None:
            rows.append([VARIABLE.get(k, k), str(f.n_points), "too few settings inside the regime", "—"] + ranges)
        else:
            rows.append([VARIABLE.get(k, k), str(f.n_points), f"{f.fit.slope:.3f} ± {f.fit.stderr:.3f}",
                         f"{f.fit_pop.slope:.3f}"] + ranges)
    out.append(table(["Against", "Units", "Slope ± s.e.", "Optimum", "Sketch's range", "Slides' range"], rows,
                     title="Log-log slopes of the trained $w$ inside the chosen regime (ReLU, isotropic)",
                     folded=len(rows) > 8, widths=[14, 10, 20, 14, 21, 21],
                     note="Descriptive, not a check. Optimum: the slope of the population-optimal $w$ over the same "
                          "settings; the ranges are those of Theorem 3.4 in the sketch's and the slides' versions."))

    for key in ("noniso", "whitened"):
        u = units[key]
        rows = []
        for cls in cfg["classes"]:
            for i, c in enumerate(u.configs):
                if c["function_class"] == cls and c["seed"] == 0:
                    rows.append([cls, f"{c['L']:g}", f"{u.dist_cov[i]:.3f}", f"{u.dist_iso[i]:.3f}",
                                 f"{u.p_trained[i]:.2f}", f"{u.p_star[i]:.2f}"])
        out.append(table(["Class", "$L$", "Distance to $\\Sigma^{-1}$", "Distance to $I$", "$p$", "$p^*$"], rows,
                         title=f"Covariance lemma, {SETTING_LABEL[SETTING_OF[key]]} inputs: the normalised $M$ "
                               f"against $\\Sigma^{{-1}}$ and $I$ (seed 0)", folded=len(rows) > 8,
                         note="$p$: the exponent of the best fit $M \\propto \\Sigma^{-p}$ of the trained unit; $p^*$: "
                              "that of the population optimum."))

    b, full = a.block, units["full"]
    rows = [[f"{c['function_class']}, $L = {c['L']:g}$, seed {c['seed']}", _pair(b.w[i], full.w_pop[i]),
             f"{b.xblock_identity_distance[i]:.3f}", f"{b.label_row_ratio[i]:.3f}", f"{b.label_col_ratio[i]:.3f}",
             f"{b.value_label[i]:.3f}"] for i, c in enumerate(full.configs)]
    for d, fd in sorted(a.full_more.items()):
        fb = fd.block
        rows += [[f"{c['function_class']}, $L = {c['L']:g}$, $d = {d}$, seed {c['seed']}", _pair(fb.w[i], fd.w_pop[i]),
                  f"{fb.xblock_identity_distance[i]:.3f}", f"{fb.label_row_ratio[i]:.3f}",
                  f"{fb.label_col_ratio[i]:.3f}", f"{fb.value_label[i]:.3f}"] for i, c in enumerate(fd.configs)]
    out.append(table(["Unit", "$w$ (optimum)", "$x$-block from $wI$", "Label row / $x$-block",
                      "Label column / $x$-block", "$W_V$ label weight"], rows,
                     title="Full $W_K$, $W_Q$, $W_V$: block form of $W_K^\\top W_Q$ and the label row of $W_V$",
                     folded=len(rows) > 8, widths=[31, 15, 14, 14, 14, 12],
                     note="$x$-block from $wI$: the distance of the input block of $W_K^\\top W_Q$ from its best "
                          f"multiple of the identity. A unit without a $d$ is at $d = {a.cfg['d']}$."))
    return "\n\n".join(out)


def covariance_summary(a: Analysis) -> str:
    """Median over units inside the window regime of the covariance measurements, per setting (a sentence each)."""
    cfg = a.cfg
    lines = ["The covariance measurements of the units inside the window regime, per input setting:", ""]
    for key in ("noniso", "whitened"):
        u = a.units[key]
        ok = u.w_pop >= cfg["regime_w"]
        lines.append(f"* **{SETTING_LABEL[SETTING_OF[key]]}**: {int(ok.sum())} units with optimal $w \\ge "
                     f"{cfg['regime_w']:g}$; median distance to $\\Sigma^{{-1}}$ {np.median(u.dist_cov[ok]):.3f} (to "
                     f"$I$ {np.median(u.dist_iso[ok]):.3f}); median exponent $p$ of $M \\propto \\Sigma^{{-p}}$: "
                     f"trained {np.nanmedian(u.p_trained[ok]):.2f}, population optimum {np.median(u.p_star[ok]):.2f}; "
                     f"population loss at $p = 1$ over the best $p$: "
                     f"+{100 * np.median(u.loss_pop_p1[ok] / u.loss_pop[ok] - 1):.1f}% (median).")
    return "\n".join(lines)


VERSIONS = ("slides", "sphere", "sketch")


def theorem34_table(t: Theorem34) -> str:
    """The local exponent d log w*/d log s of the population optimum at s = n L^2/sigma^2, per d, n and L/sigma: the
    theorem's ranges, one table per L/sigma (the chapter's open, the others folded), the noiseless saturation."""
    out = [table(["$d$"] + [f"{v}" for v in VERSIONS],
                 [[str(d), f"[{1 / d:.3f}, {2 / d:.3f}]", f"[{1 / (d + 1):.3f}, {2 / (d + 1):.3f}]",
                   f"[{1 / (d + 2):.3f}, {2 / (d + 2):.3f}]"] for d in t.ds],
                 title=f"Theorem 3.4: the range of the exponent {EXPONENT} in each version")]
    for rho in t.rhos:
        mine = rho == t.rho_check
        rows = [[str(n)] + [f"{t.exponent[(d, n, rho)]:.3f} ± {jackknife_se(t.exponent_jack[(d, n, rho)]):.3f}"
                            for d in t.ds] for n in t.ns]
        out.append(table(["$n$"] + [f"$d = {d}$" for d in t.ds], rows,
                         title=f"Local exponent {EXPONENT} of the population-optimal $w$ (ReLU) at "
                               f"$L/\\sigma = {rho ** 0.5:g}$" + (" (the chapter's; the checks read it)" if mine
                                                                   else ""),
                         folded=not mine or len(rows) > 8,
                         note="Read at $s = nL^2/\\sigma^2$; ± its Monte Carlo standard error (the delete-one-batch "
                              "jackknife over the scan's batches)."))
    rows = [[str(n)] + [_g(t.curves[(d, n)].w_sat) for d in t.ds] for n in t.ns]
    out.append(table(["$n$"] + [f"$d = {d}$" for d in t.ds], rows,
                     title="Noiseless saturation $w_{\\mathrm{sat}} = \\arg\\min_w \\mathrm{bias}(w)$",
                     folded=len(rows) > 8))
    return "\n\n".join(out)


def _where(e: float, d: int) -> str:
    inside = [v for v in VERSIONS if th.theorem34_exponents(d, v)[0] <= e <= th.theorem34_exponents(d, v)[1]]
    return ("inside the " + ", ".join(inside) + " range" + ("s" if len(inside) > 1 else "")) if inside \
        else "outside all three ranges"


def theorem34_conclusion(t: Theorem34) -> str:
    """Where the exponent goes as n grows, for each d, computed from the table (no regime cut-off): prose."""
    rho, ns = t.rho_check, t.ns
    lines = [f"At $L/\\sigma = {rho ** 0.5:g}$ (the chapter's setting), as $n$ grows from {ns[0]} to {ns[-1]}:", ""]
    for d in t.ds:
        e = [t.exponent[(d, n, rho)] for n in ns]
        steps = np.diff(e)
        trend = "falls at every step" if np.all(steps < 0) else "rises at every step" if np.all(steps > 0) else \
            f"moves non-monotonically (steps {', '.join(f'{x:+.3f}' for x in steps)})"
        lines.append(f"* $d = {d}$: the exponent {trend}, {e[0]:.3f} → {e[-1]:.3f} (last step {steps[-1]:+.3f}); "
                     f"at $n = {ns[-1]}$ it is {_where(e[-1], d)}.")
    lines += ["", f"Across $L/\\sigma$ at the largest $n$ ({ns[-1]}):", ""]
    for d in t.ds:
        vals = [t.exponent[(d, ns[-1], r)] for r in t.rhos]
        lines.append(f"* $d = {d}$: "
                     + ", ".join(f"{v:.3f} at $L/\\sigma = {r ** 0.5:g}$" for r, v in zip(t.rhos, vals)) + ".")
    return "\n".join(lines)


def noise_table(t: Theorem34) -> str:
    """The noise term's exponent in w per d: closed form, Monte Carlo, and the two versions' predictions."""
    rows, ns = [], sorted({t.noise[d].n for d in t.ds})
    for d in t.ds:
        z = t.noise[d]
        mc = (f"{z.exponent_mc:.3f}" if np.isfinite(z.exponent_mc)
              else f"too few $w$ with $n_{{\\mathrm{{eff}}}} \\ge {NEFF_MIN:g}$")
        rows.append([str(d), f"{z.exponent:.3f}", mc + ("" if len(ns) == 1 else f" ($n = {z.n}$)"),
                     f"{z.mc_max_rel_dev:.3f}", f"{d / 2:g}", f"{(d - 1) / 2:g}"])
    at = f" at $n = {ns[0]}$" if len(ns) == 1 else ""
    return table(["$d$", "Closed form", f"Monte Carlo{at}", "Largest deviation", "Sketch: $d/2$",
                  "Sphere: $(d-1)/2$"], rows,
                 title="Noise term $n\\,\\mathbb{E}[\\sum_i a_i^2]$ against $w$ (inputs on $S^{d-1}$): fitted exponent "
                       f"over $w \\in [{NOISE_FIT_W[0]:g}, {NOISE_FIT_W[1]:g}]$", folded=len(rows) > 8,
                 widths=[8, 16, 26, 16, 16, 18],
                 note="Closed form: the limit $n \\to \\infty$. Largest deviation: "
                      "$\\max \\lvert \\mathrm{MC} / \\text{closed form} - 1\\rvert$ where "
                      f"$n_{{\\mathrm{{eff}}}} = 1/\\mathbb{{E}}[\\sum_i a_i^2] \\ge {NEFF_MIN:g}$, the points the "
                      "Monte Carlo fit uses.")


def trained_large_n_table(big: TrainedLargeN) -> str:
    """Trained ReLU units at large n against the population optimum of their own (d, n, s) and of the other L."""
    ns = sorted({c["n"] for c in big.configs})
    rows = [[str(big.d[i]) + ("" if len(ns) == 1 else f" ($n = {c['n']}$)"), f"{c['L']:g}", str(c["seed"]),
             f"{_g(big.w[i])} ({big.resid[i]:.3f})", _g(big.w_pop[i]), _g(big.w_pop_other[i])]
            for i, c in enumerate(big.configs)]
    at = f" at $n = {ns[0]}$" if len(ns) == 1 else ""
    return table(["$d$", "$L$", "Seed", "Trained $w$ (residual)", "Optimum", "Optimum of the other $L$"], rows,
                 title=f"Trained ReLU units{at} against the population curve of their own $(d, n, s)$",
                 folded=len(rows) > 8, widths=[10, 10, 10, 26, 18, 26],
                 note="Residual: $\\lVert M - wI\\rVert_F / \\lVert M\\rVert_F$ of the trained unit; the optimum of "
                      "the other $L$ of the sweep is the control.")


def dynamics_table(growths: list[Growth], early: Ordering, late: Ordering, gain: Ordering | None = None) -> str:
    """Growth of the norm during training: the gain (the decided statistic) and the log-slope early and late per
    panel and L, and the steps to half the final norm."""
    head = ["Panel"] + [f"$L = {L:g}$" for L in early.L]
    rows = []
    if gain is not None:
        rows += [[f"{cls}, {setting}, gain"] + [f"{v:.2f}" for v in np.nanmean(tab, 0)]
                 for (setting, cls), tab in gain.by_panel.items()]
    gains = table(head, rows, widths=[34] + [66 // len(early.L)] * len(early.L),
                  title=f"Growth of {NORM} during pretraining: the gain, mean of $\\log(\\lVert M(t)\\rVert_2 / "
                        "\\lVert M(0)\\rVert_2)$ over the logged steps (means over the trained units)",
                  note="The difference of two gains is the time-averaged log ratio of the two norms: "
                       "the unit with the larger gain has grown more after the same number of steps.") if rows else ""
    rows = []
    for (setting, cls), tab in early.by_panel.items():
        rows.append([f"{cls}, {setting}, early"] + [f"{1000 * v:.2f}" for v in np.nanmean(tab, 0)])
        late_tab = late.by_panel[(setting, cls)]
        rows.append([f"{cls}, {setting}, late"] + [f"{1000 * v:.2f}" for v in np.nanmean(late_tab, 0)])
    widths = [34] + [66 // len(early.L)] * len(early.L)
    slopes = table(head, rows, widths=widths,
                   title=f"Growth of {NORM}: slope of $\\log \\lVert M\\rVert_2$ per 1000 steps (means over the trained units)",
                   folded=len(rows) > 8,
                   note="Early: over the first part of training; late: over its last quarter. Smallest early step "
                        f"between consecutive $L$: {1000 * early.worst_step:.3f} per 1000 steps "
                        f"({_arrow(early.worst_where)}).")
    rows = []
    for g in growths:
        for cls in sorted({c["function_class"] for c in g.configs}):
            half = [np.nanmean(g.t_half[g.grid.units(function_class=cls, L=L)]) for L in early.L]
            rows.append([f"{cls}, {g.setting}"] + [f"{v:.0f}" for v in half])
    halves = table(head, rows, widths=widths, title=f"Steps to half the final {NORM} (means over the trained units)",
                   folded=len(rows) > 8)
    return (gains + "\n\n" if gains else "") + slopes + "\n\n" + halves
