"""Plots of the norm-scaling figure (plots only: this module is outside the cache fingerprint, so it computes
nothing that is cached).

The numbers the plots used to carry in their titles (fitted slopes' theory ranges, p*, the full unit's block
ratios) are printed by :mod:`softmax_icl.figures.norm_scaling.summary`; the figures keep one short title per panel
and one legend.
"""

from __future__ import annotations

import math

import matplotlib.ticker as mticker
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ... import plotting
from ... import theory as th
from ...plotting import QUALITATIVE
from ...book import design
from ...book.run import Run
from .analysis import P_GRID, SETTING_LABEL, SETTING_OF, Analysis, row_index, seed_mean, sweep_index
from .dynamics import Growth
from .sweeps import whitened_L
from .theorem34 import Theorem34, TrainedLargeN
from .trends import L_trend, n_trend, panels, sigma_trend
from . import claims as check_ids

#: The checks' thresholds, from the statistical design: trained w within this factor of the optimum; the covariance
#: lemma's distance from Sigma^-1.
W_RATIO_TOL = round(math.exp(design.load().entry("norm_scaling", check_ids.TRAINED_W_NEAR_OPTIMUM).test.threshold), 6)
COV_DIST_TOL = design.load().entry("norm_scaling", check_ids.COVARIANCE_LEMMA_WHITENED).metrics["distance"].threshold
CLASS_COLORS = {"relu": QUALITATIVE[0], "cosine": QUALITATIVE[1]}
RANGE_COLORS = {"slides": "#9467bd", "sphere": "#2ca02c", "sketch": "#d62728"}
#: Marker and line style of each input setting, the same in every panel of the covariance figure.
SETTING_STYLE = {"noniso": dict(marker="o", ls="-"), "whitened": dict(marker="^", ls="--")}
REGIME_LABEL = "Theorem 3.4 regime (fitted)"
W_LABEL = "window scale w (M = w I)"


def _log_log(ax) -> None:
    """Both axes on the style's log scale (:func:`~softmax_icl.plotting.log_axis`), once the data are drawn."""
    plotting.log_axis(ax, "x")
    plotting.log_axis(ax, "y")


def highlighted(n: int, k: int = 4) -> list[int]:
    """Indices of the ``k`` values (of ``n`` in order) drawn in colour: both ends and evenly spaced between."""
    return sorted(set(np.linspace(0, n - 1, min(k, n)).round().astype(int).tolist()))


def plot_training(run: Run, a: Analysis):
    """||M||_2 against pretraining step, one curve per L (seed mean); panels class x input distribution; the
    triangles at the right edge are each L's population-optimal ||M*||_2. Four L values, both ends of the grid and
    evenly spaced between, are drawn in distinct colours; the others in thin grey (ten shades of one map could not
    be told apart)."""
    cfg = run.cfg
    Ls = cfg["L_values"]
    fig, axes = plotting.subplots(2, len(cfg["classes"]), row_height=2.0, sharex=True, sharey=True)
    shown = highlighted(len(Ls))
    colors = dict(zip(shown, plotting.qualitative(len(shown))))
    for ax, (key, cls) in zip(axes.flat, panels(a)):
        u = a.units[key]
        for i, (L, pop) in enumerate(zip(Ls, L_trend(a, key, cls).norm_pop)):
            idx = u.grid.units(function_class=cls, L=L, sigma=cfg["sigma"])
            col, lw, z = (colors[i], 1.6, 3) if i in colors else ("0.6", 0.8, 2)
            ax.plot(u.steps, u.norm_history[:, idx].mean(1), color=col, lw=lw, zorder=z,
                    label=f"$L = {L:g}$" if i in colors else None)
            ax.plot([u.steps[-1] * 1.02], [pop], marker="<", color=col, ms=5 if i in colors else 3, clip_on=False)
        ax.set(title=f"{cls}, {SETTING_LABEL[SETTING_OF[key]]} inputs")
    plotting.log_axis(axes[0, 0])                    # shared by every panel, once all are drawn
    if len(shown) < len(Ls):
        axes[0, 0].plot([], [], color="0.6", lw=0.8, label="other $L$ of the grid")
    axes[0, 0].plot([], [], "<", color="0.3", label="population optimum")
    for ax in axes[:, 0]:
        ax.set_ylabel("‖M‖₂")
    for ax in axes[-1]:
        ax.set_xlabel("pretraining step")
    plotting.figure_legend(fig, ncols=3)
    return fig


def _fit_note(ax, f) -> str:
    """Shade the regime the slope is fitted in and draw the fitted line(s); returns the panel's title."""
    if len(f.x):
        ax.axvspan(min(f.x), max(f.x), color="0.85", alpha=0.6, lw=0, zorder=0)
    if f.fit is None:
        return "too few units in the regime"
    for g in [None] if f.groups is None else sorted(set(f.groups)):
        xg = f.x if g is None else f.x[np.asarray(f.groups) == g]
        if len(xg):
            xs = np.geomspace(xg.min(), xg.max(), 20)
            ax.plot(xs, f.fit.predict(xs, g), color="k", lw=1.8, zorder=4)
    return f"fitted slope {f.fit.slope:.2f} ± {f.fit.stderr:.2f}"


def _trained_and_optimum(ax, x, w, x_opt, w_opt, cls, floor, marker="o", label=None):
    ax.scatter(x, np.maximum(w, floor), s=14, marker=marker, color=CLASS_COLORS[cls], alpha=0.7,
               label=label or f"{cls}: trained (each seed)")
    ax.plot(x_opt, np.maximum(w_opt, floor), color=CLASS_COLORS[cls], lw=1, ls="--",
            label=f"{cls}: population optimum")


def plot_scaling(run: Run, a: Analysis):
    """Final window scale w against L (at sigma = ``sigma``), sigma (at L = ``L_sigma``) and n (at ``sigma``, one
    constant per L): trained units, the population optimum, and the slope fitted inside the Theorem 3.4 regime
    (grey; its value is each panel's title). Units with w below ``w_min`` are drawn at ``w_min``. The optimum's
    slopes and the theory's ranges are in the key-numbers table."""
    cfg, units, fits = run.cfg, a.units, a.fits
    floor = cfg["w_min"]
    fig, axes = plotting.subplots(1, 3, row_height=3.1)
    ax_L, ax_s, ax_n = axes[0]
    iso = units["iso"]
    for cls in cfg["classes"]:
        t = L_trend(a, "iso", cls)
        idx = sweep_index(iso, cls, "L", cfg)
        w_opt = seed_mean(iso.w_pop, iso.grid, [(cls, L, cfg["sigma"], cfg["n"]) for L in t.L])
        _trained_and_optimum(ax_L, [iso.configs[i]["L"] for i in idx], iso.w[idx], t.L, w_opt, cls, floor)
        idx = sweep_index(iso, cls, "sigma", cfg)
        t = sigma_trend(a, cls)
        _trained_and_optimum(ax_s, [iso.configs[i]["sigma"] for i in idx], iso.w[idx], t.sigma, t.w_pop, cls, floor)
    u = units["n"]
    for L, mk in zip(cfg["n_sweep_L"], ("s", "D", "v", "P")):
        idx = u.grid.units(L=L)
        t = n_trend(a, L)
        _trained_and_optimum(ax_n, [u.configs[i]["n"] for i in idx], u.w[idx], t.n, t.w_pop, "relu", floor,
                             marker=mk, label=f"relu, L = {L:g}: trained (n sweep)")
    ax_L.plot([], [], color="k", lw=1.8, label="fitted slope")
    for ax, key, xlabel in ((ax_L, "L", "Lipschitz constant L"), (ax_s, "sigma", "label noise σ"),
                            (ax_n, "n", "context length n")):
        ax.set(xscale="log", title=_fit_note(ax, fits[key]), xlabel=xlabel)
        plotting.log_axis(ax)
    _log_log(ax_n)
    ax_L.set_ylabel(W_LABEL)
    plotting.figure_legend(fig, ncols=3, extra=[Patch(color="0.85", label=REGIME_LABEL)])
    return fig


def plot_regime(run: Run, a: Analysis):
    """Trained w of every ReLU unit against s = n L^2 / sigma^2 over the population curves w*(s) of their n
    (dotted: the noiseless limit each curve saturates at)."""
    cfg, units = run.cfg, a.units
    fig, axes = plotting.subplots(1, 1, width=0.75, row_height=3.2)
    ax = axes[0, 0]
    ns = sorted(a.trained_curves)
    col = dict(zip(ns, plotting.sequential(len(ns))))
    for n in ns:
        c = a.trained_curves[n]
        ax.plot(c.s, c.w, color=col[n], lw=1.2, label=f"n = {n}")
        ax.axhline(c.w_sat, color=col[n], lw=0.7, ls=":")
    for key in ("iso", "n"):
        u = units[key]
        relu = np.array([c["function_class"] == "relu" for c in u.configs])
        for n in ns:
            m = relu & np.array([c["n"] == n for c in u.configs])
            ax.scatter(u.snr[m], np.maximum(u.w[m], cfg["w_min"]), color=col[n], s=16, zorder=3)
    ax.scatter([], [], color="0.3", s=16, label="trained units")
    ax.plot([], [], color="0.3", ls=":", lw=0.7, label="noiseless limit")
    ax.set(xscale="log", xlabel="s = n L² / σ²", ylabel=W_LABEL, ylim=(cfg["w_min"], None),
           title="population optimum w*(s) (lines) and trained units")
    plotting.log_axis(ax)
    plotting.figure_legend(fig, ncols=4)
    return fig


def plot_theorem34(run: Run, t: Theorem34, big: TrainedLargeN):
    """Local exponent d log w* / d log s of the population optimum against s, one curve per n, one panel per d
    (at most three), over the three versions of the Theorem 3.4 range (bands; their values are in the theorem's
    table); dots at s = n (L/sigma)^2 of the chapter's check."""
    ds = t.ds
    fig, axes = plotting.subplots(1, len(ds), row_height=3.0, sharey=True)
    ncol = plotting.sequential(len(t.ns))
    for ax, d in zip(axes[0], ds):
        for v in ("slides", "sphere", "sketch"):
            lo, hi = th.theorem34_exponents(d, v)
            ax.axhspan(lo, hi, color=RANGE_COLORS[v], alpha=0.15, lw=0, label=f"range: {v}")
        for n, cl in zip(t.ns, ncol):
            c = t.curves[(d, n)]
            ax.plot(c.s, c.slope, color=cl, lw=1.2, label=f"n = {n}")
            ax.plot([n * t.rho_check], [t.exponent[(d, n, t.rho_check)]], "o", color=cl, ms=4, mec="k", mew=0.6)
        ax.set(xscale="log", xlabel="s = n L² / σ²", ylim=(-0.05, 1.05), title=f"d = {d}")
        ax.xaxis.set_major_locator(mticker.LogLocator(numticks=5))
    axes[0, 0].plot([], [], "o", color="0.6", mec="k", mew=0.6, label=f"L/σ = {t.rho_check ** 0.5:g}")
    axes[0, 0].set_ylabel("local exponent of w*")
    plotting.figure_legend(fig, ncols=4)
    return fig


def plot_theorem34_noise(run: Run, t: Theorem34, big: TrainedLargeN):
    """Left: the noise term n E[sum a_i^2] against w, Monte Carlo (solid) and its n -> infinity form (dashed),
    one colour per d, with the window [30, 300] its exponent is fitted on (grey). Right: trained units at
    n = ``t34_train_n`` against the population optimum of their own L (filled) and of the sweep's other L
    (hollow, the control); grey band: within a factor ``W_RATIO_TOL``."""
    ds = t.ds
    colors = dict(zip(ds, plotting.qualitative(len(ds))))
    fig, axes = plotting.subplots(1, 2, row_height=3.0)
    ax = axes[0, 0]
    for d in ds:
        z = t.noise[d]
        ax.plot(z.w, z.mc, color=colors[d], lw=1.2, label=f"d = {d}")
        ax.plot(z.w, z.limit, color=colors[d], lw=0.9, ls="--")
    ax.axvspan(30, 300, color="0.9", lw=0, zorder=0)
    ax.plot([], [], color="0.3", lw=1.2, label="Monte Carlo")
    ax.plot([], [], color="0.3", lw=0.9, ls="--", label="n → ∞")
    ax.set(xscale="log", xlabel=W_LABEL, ylabel="noise term n E[Σ aᵢ²]", title="noise term", ylim=(0.5, None))
    plotting.log_axis(ax)
    ax = axes[0, 1]
    for d, mk in zip(ds, ("o", "s", "^", "D")):
        m = big.d == d
        ax.scatter(big.w_pop[m], big.w[m], marker=mk, s=22, color=colors[d])
        ax.scatter(big.w_pop_other[m], big.w[m], marker=mk, s=22, facecolor="none", edgecolor=colors[d])
    ax.scatter([], [], color="0.3", label="vs own L's optimum")
    ax.scatter([], [], facecolor="none", edgecolor="0.3", label="vs other L's (control)")
    lim = np.array([min(big.w.min(), big.w_pop.min(), big.w_pop_other.min()) / 1.5,
                    max(big.w.max(), big.w_pop.max(), big.w_pop_other.max()) * 1.5])
    ax.plot(lim, lim, color="k", lw=0.8, zorder=1)
    ax.fill_between(lim, lim / W_RATIO_TOL, lim * W_RATIO_TOL, color="0.85", lw=0, zorder=0)
    ax.set(xscale="log", yscale="log", xlim=lim, ylim=lim, xlabel="population-optimal w", ylabel="trained w",
           title=f"trained units, n = {run.cfg['t34_train_n']}")
    _log_log(ax)
    plotting.figure_legend(fig, ncols=4)
    return fig


def plot_dynamics(run: Run, growths: list[Growth]):
    """||M||_2 against step from a small init with a small Adam step, one curve per L (seed mean); shaded: the
    early phase where the growth rate is measured."""
    cfg = run.cfg
    Ls = cfg["dyn_L"]
    fig, axes = plotting.subplots(len(growths), len(cfg["classes"]), row_height=2.3, sharex=True, sharey=True)
    colors = plotting.sequential(len(Ls))
    for row, g in zip(axes, growths):
        for ax, cls in zip(row, cfg["classes"]):
            for L, col in zip(Ls, colors):
                idx = g.grid.units(function_class=cls, L=L)
                ax.plot(g.steps, g.norm_history[:, idx].mean(1), color=col, label=f"L = {L:g}")
            ax.axvspan(0, cfg["dyn_early"] * g.steps[-1], color="0.92", lw=0, zorder=0)
            ax.set(title=f"{cls}, {g.setting} inputs")
        row[0].set_ylabel("‖M‖₂")
    plotting.log_axis(axes[0, 0])                    # shared by every panel, once all are drawn
    for ax in axes[-1]:
        ax.set_xlabel("pretraining step")
    plotting.figure_legend(fig, extra=[Patch(color="0.92", label="early phase (growth rate)")])
    return fig


def plot_scan(run: Run, a: Analysis):
    """Population loss over M = w I (relative to its minimum) for some ReLU settings, one curve per L, with the
    trained units' w (dashed, one line per seed)."""
    cfg, u = run.cfg, a.units["iso"]
    wg, sc, rows = a.w_grid, a.scans.iso_scan, a.scans.iso_rows
    fig, axes = plotting.subplots(1, 1, width=0.75, row_height=3.0)
    ax = axes[0, 0]
    Ls = cfg["L_values"]
    show = [L for L in Ls if L in (0.1, 0.3, 1.0, 10.0)] or Ls[:: max(1, len(Ls) // 4)]
    row_of = row_index(rows)
    for L, col in zip(show, plotting.sequential(len(show))):
        i = row_of[("relu", float(L), int(cfg["n"]))]
        loss = sc.bias[i] + cfg["sigma"] ** 2 * sc.noise[i]
        wb, lb = th.refine_minimum(wg, loss)
        ax.plot(wg, loss / lb, color=col, label=f"L = {L:g} (w* = {wb:.3g})")
        for k in u.grid.units(function_class="relu", L=L, sigma=cfg["sigma"]):
            ax.axvline(max(u.w[k], cfg["w_min"]), color=col, lw=0.9, ls="--")
    ax.plot([], [], color="0.4", ls="--", lw=0.9, label="trained w (each seed)")
    ax.set(xscale="log", yscale="log", xlabel=W_LABEL, ylabel="population loss / its minimum", ylim=(0.95, 20),
           title=f"ReLU, σ = {cfg['sigma']:g}, n = {cfg['n']}")
    _log_log(ax)
    plotting.figure_legend(fig, ncols=3)
    return fig


def plot_trained_vs_optimal(run: Run, a: Analysis):
    """Trained against population-optimal w for every unit of every sweep (colour: class; marker: sweep); grey
    band: within a factor ``W_RATIO_TOL``; shaded left of ``regime_w``: no window, not checked."""
    cfg, units = run.cfg, a.units
    fig, axes = plotting.subplots(1, 1, width=0.75, row_height=3.4)
    ax = axes[0, 0]
    for key, mk, lab in (("iso", "o", "isotropic, L and σ sweeps"), ("n", "s", "isotropic, n sweep"),
                         ("whitened", "^", "whitened, M = w Σ⁻¹"), ("full", "D", r"full $W_K, W_Q, W_V$")):
        uu = units[key]
        wt = uu.w if key != "full" else a.block.w
        cls = np.array([c["function_class"] for c in uu.configs])
        for c in cfg["classes"]:
            m = cls == c
            ax.scatter(np.maximum(uu.w_pop[m], cfg["w_min"]), np.maximum(wt[m], cfg["w_min"]), marker=mk, s=16,
                       color=CLASS_COLORS[c], alpha=0.7)
        ax.scatter([], [], marker=mk, s=16, color="0.4", label=lab)
    lim = np.array([cfg["w_min"], 50])
    ax.plot(lim, lim, color="k", lw=0.8)
    ax.fill_between(lim, lim / W_RATIO_TOL, lim * W_RATIO_TOL, color="0.8", alpha=0.5, lw=0,
                    label=f"within a factor {W_RATIO_TOL}")
    ax.axvspan(cfg["w_min"], cfg["regime_w"], color="0.93", lw=0, zorder=0)
    ax.set(xscale="log", yscale="log", xlabel="population-optimal w (scan)", ylabel="trained w", xlim=lim, ylim=lim,
           title="trained against optimal w, every unit")
    _log_log(ax)
    plotting.figure_legend(fig, ncols=3, extra=[Patch(color=CLASS_COLORS[c], label=c) for c in cfg["classes"]])
    return fig


def _cov_rows(u, cfg, L):
    """Index of the seed-0 unit of each class at L."""
    return {c: int(u.grid.units(function_class=c, L=L, seed=0)[0]) for c in cfg["classes"]}


def plot_covariance(run: Run, a: Analysis):
    """Covariance lemma, non-isotropic (circles, solid) and whitened (triangles, dashed) inputs, colour = class.
    (a) Population loss against the exponent p of M = w Sigma^-p (best w for each p; seed 0). (b) The trained M's
    diagonal along Sigma's eigenvectors against the eigenvalue, with Sigma^-1 and I for reference. (c) Distance of
    every trained M from Sigma^-1 against its population-optimal w (shaded: no window, not checked)."""
    cfg, units, cov = run.cfg, a.units, a.cov
    Lshow = cfg["L_sigma"] if cfg["L_sigma"] in whitened_L(cfg) else whitened_L(cfg)[-1]
    fig, axes = plotting.subplots(1, 3, row_height=3.2)
    ax_p, ax_d, ax_c = axes[0]
    lam, order = np.sort(cov), np.argsort(cov)
    for key, style in SETTING_STYLE.items():
        u = units[key]
        for c, i in _cov_rows(u, cfg, Lshow).items():
            ax_p.plot(P_GRID, u.loss_by_p[i] / u.loss_by_p[i].min(), color=CLASS_COLORS[c], ms=3, **style)
            diag = np.diag(a.M[key][i])[order]
            ax_d.plot(lam, diag / np.exp(np.log(np.abs(diag)).mean()), color=CLASS_COLORS[c], ls="none",
                      marker=style["marker"])
            m = np.array([e["function_class"] == c for e in u.configs])
            ax_c.scatter(np.maximum(u.w_pop[m], cfg["w_min"]), u.dist_cov[m], marker=style["marker"], s=16,
                         color=CLASS_COLORS[c])
    ax_p.axvline(1.0, color="k", lw=0.8)
    ax_p.set(xlabel="exponent p (M = w Σ⁻ᵖ)", ylabel="population loss / minimum",
             title=f"loss against p (L = {Lshow:g})")
    plotting.log_axis(ax_p)
    for p, ls, lab in ((1.0, "-", "Σ⁻¹ (covariance lemma)"), (0.0, ":", "I (isotropic window)")):
        ref = lam ** -p
        ax_d.plot(lam, ref / np.exp(np.log(ref).mean()), color="k", ls=ls, lw=0.9, label=lab)
    ax_d.set(xscale="log", yscale="log", xlabel="eigenvalue of Σ", ylabel="diagonal of M (normalised)",
             title="trained M along Σ")
    _log_log(ax_d)
    ax_c.axhline(COV_DIST_TOL, color="k", lw=0.8, ls="--", label=f"tolerance {COV_DIST_TOL}")
    ax_c.axhline(th.normalized_distance(np.eye(cfg["d"]), th.window_base(cfg["d"], "nonisotropic")), color="0.5",
                 lw=0.8, ls="-.", label="distance of I from Σ⁻¹")
    ax_c.axvspan(cfg["w_min"], cfg["regime_w"], color="0.93", lw=0, zorder=0)
    ax_c.set(xscale="log", xlabel="population-optimal w", ylabel="distance from Σ⁻¹ (Frobenius)",
             title="every trained M", xlim=(0.1, 50))
    plotting.log_axis(ax_c, "x")
    plotting.figure_legend(fig, ncols=3, extra=[Patch(color=CLASS_COLORS[c], label=c) for c in cfg["classes"]]
                           + [Line2D([], [], color="0.4", ms=4, label=SETTING_LABEL[SETTING_OF[key]], **style)
                              for key, style in SETTING_STYLE.items()])
    return fig


def plot_full(run: Run, a: Analysis):
    """Heat maps of W_K^T W_Q (top row) and W_V (bottom row) of one full-parameter unit at each ambient dimension
    trained (a column each: the chapter's d and up to two further d of full_more_d, the smallest; the first class at
    the chapter's d, ReLU at the others; the largest full_L, seed 0); the lines separate the input coordinates from
    the label's. Their block ratios are in the key-numbers table."""
    cfg = run.cfg
    L = cfg["full_L"][-1]
    columns = []                                   # (d, class, W_K^T W_Q, W_V) of one unit per dimension
    for d in sorted([cfg["d"], *sorted(a.full_more)[:plotting.MAX_PANELS_PER_ROW - 1]]):
        if d == cfg["d"]:
            i = int(a.units["full"].grid.units(function_class=cfg["classes"][0], L=L, seed=0)[0])
            columns.append((d, cfg["classes"][0], a.block.A[i], a.WV[i]))
        else:
            fd = a.full_more[d]
            j = int(fd.grid.units(function_class="relu", L=L, seed=0)[0])
            columns.append((d, "relu", fd.block.A[j], fd.WV[j]))
    fig, axes = plotting.subplots(2, len(columns), row_height=1.9 if len(columns) > 1 else 3.0)
    for k, (d, cls, A_kq, A_v) in enumerate(columns):
        labels = [f"x{j + 1}" for j in range(d)] + ["y"]
        for ax, A, name in ((axes[0, k], A_kq, r"$W_K^\top W_Q$"), (axes[1, k], A_v, r"$W_V$")):
            vmax = np.abs(A).max()
            im = ax.imshow(A, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
            fig.colorbar(im, ax=ax, shrink=0.8)
            ax.set_title(f"{name}, $d$ = {d} ({cls}, $L$ = {L:g})")
            ticks = range(d + 1) if d <= 5 else [0, d - 1, d]     # a wide matrix: its first and last x and y
            ax.set_xticks(ticks, [labels[t] for t in ticks])
            ax.set_yticks(ticks, [labels[t] for t in ticks])
            ax.grid(False)
            ax.axhline(d - 0.5, color="k", lw=0.8)
            ax.axvline(d - 0.5, color="k", lw=0.8)
        axes[0, k].set(xlabel="query token coordinate", ylabel="key token coordinate")
        axes[1, k].set(xlabel="input token coordinate", ylabel="output coordinate")
    return fig
