"""Plots of the norm-scaling figure (plots only: this module is outside the cache fingerprint, so it computes
nothing that is cached)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np

from ... import theory as th
from ...records import Run
from .analysis import (P_GRID, SETTING_LABEL, SETTING_OF, Analysis, L_trend, n_trend, panels, seed_mean,
                       sigma_trend, sweep_index)
from .claims import COV_DIST_TOL, W_RATIO_TOL
from .dynamics import Growth
from .sweeps import whitened_L
from .theorem34 import Theorem34, TrainedLargeN

CLASS_COLORS = {"relu": "#1f77b4", "cosine": "#ff7f0e"}



def _L_colors(Ls):
    return plt.cm.viridis(np.linspace(0, 0.92, len(Ls)))


def plot_training(run: Run, a: Analysis):
    """||M||_2 against pretraining step, one curve per L; panels class x input distribution."""
    cfg = run.cfg
    Ls = cfg["L_values"]
    pans = panels(a)
    fig, axes = plt.subplots(2, len(cfg["classes"]), figsize=(4.6 * len(cfg["classes"]), 7.0), sharex=True,
                             squeeze=False)
    colors = _L_colors(Ls)
    for ax, (key, cls) in zip(axes.ravel(), pans):
        u = a.units[key]
        t = L_trend(a, key, cls)
        for L, col, pop in zip(Ls, colors, t.norm_pop):
            idx = [i for i, c in enumerate(u.configs) if c["function_class"] == cls and math.isclose(c["L"], L)
                   and math.isclose(c["sigma"], cfg["sigma"])]
            h = u.norm_history[:, idx].mean(1)
            ax.plot(u.steps, h, color=col, lw=1.3, label=f"L = {L:g}")
            ax.plot([u.steps[-1] * 1.02], [pop], marker="<", color=col, ms=6, clip_on=False)
        ax.set(yscale="log", title=f"{cls}, {SETTING_LABEL[SETTING_OF[key]]} inputs", xlabel="pretraining step",
               ylabel="‖M‖₂")
        ax.set_ylim(bottom=1e-3)
    axes[0, -1].legend(fontsize="x-small", ncol=2, loc="lower right")
    fig.suptitle(f"‖M‖₂ during pretraining (d = {cfg['d']}, n = {cfg['n']}, σ = {cfg['sigma']:g}; mean of "
                 f"{cfg['seeds']} seeds). Triangles: population-optimal ‖M*‖₂ of each L", fontsize="small")
    return fig


def _shade_regime(ax, x_in):
    if len(x_in):
        ax.axvspan(min(x_in), max(x_in), color="0.85", alpha=0.5, lw=0, zorder=0)


def _no_minor_labels(ax):
    from matplotlib.ticker import NullFormatter
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_scaling(run: Run, a: Analysis):
    """Final w against L, sigma and n (log-log), with the population optimum and the fitted slopes."""
    cfg, units, fits = run.cfg, a.units, a.fits
    floor = cfg["w_min"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    # against L
    ax = axes[0]
    for cls in cfg["classes"]:
        t = L_trend(a, "iso", cls)
        idx = sweep_index(units["iso"], cls, "L", cfg)
        ax.scatter([units["iso"].configs[i]["L"] for i in idx], np.maximum(units["iso"].w[idx], floor), s=14,
                   color=CLASS_COLORS[cls], alpha=0.6, label=f"{cls}: trained (each seed)")
        ax.plot(t.L, np.maximum(seed_mean(units["iso"].w_pop, units["iso"].configs,
                                              [(cls, L, cfg["sigma"], cfg["n"]) for L in t.L]), floor),
                color=CLASS_COLORS[cls], lw=1, ls="--", label=f"{cls}: population optimum")
    sub = _annotate_fit(ax, fits["L"], "L")
    ax.set(xscale="log", yscale="log", xlabel="Lipschitz constant L", ylabel="window scale w (best multiple of I)")
    ax.set_title(f"against L (σ = {cfg['sigma']:g}, n = {cfg['n']})\n{sub}", fontsize="small")
    # against sigma
    ax = axes[1]
    for cls in cfg["classes"]:
        idx = sweep_index(units["iso"], cls, "sigma", cfg)
        sig = np.array([units["iso"].configs[i]["sigma"] for i in idx])
        ax.scatter(sig, np.maximum(units["iso"].w[idx], floor), s=14, color=CLASS_COLORS[cls], alpha=0.6,
                   label=f"{cls}: trained")
        t = sigma_trend(a, cls)
        ax.plot(t.sigma, np.maximum(t.w_pop, floor), color=CLASS_COLORS[cls], lw=1, ls="--",
                label=f"{cls}: optimum")
    sub = _annotate_fit(ax, fits["sigma"], "σ")
    ax.set(xscale="log", yscale="log", xlabel="label noise σ", ylabel="window scale w")
    ax.set_title(f"against σ (L = {cfg['L_sigma']:g}, n = {cfg['n']})\n{sub}", fontsize="small")
    # against n
    ax = axes[2]
    u = units["n"]
    for L, mk in zip(cfg["n_sweep_L"], ("o", "s", "^", "D")):
        idx = [i for i, c in enumerate(u.configs) if math.isclose(c["L"], L)]
        ax.scatter([u.configs[i]["n"] for i in idx], np.maximum(u.w[idx], floor), s=16, marker=mk,
                   color=CLASS_COLORS["relu"], alpha=0.6, label=f"ReLU L = {L:g}: trained")
        t = n_trend(a, L)
        ax.plot(t.n, t.w_pop, color=CLASS_COLORS["relu"], lw=1, ls="--")
    ax.plot([], [], color=CLASS_COLORS["relu"], lw=1, ls="--", label="population optimum")
    sub = _annotate_fit(ax, fits["n"], "n")
    ax.set(xscale="log", yscale="log", xlabel="context length n", ylabel="window scale w")
    lo, hi = ax.get_ylim()
    ticks = [v for v in (0.3, 0.5, 1, 2, 3, 5, 10, 20, 30, 50, 100) if lo <= v <= hi]
    ax.set_yticks(ticks, [f"{v:g}" for v in ticks])
    ax.set_title(f"against n (σ = {cfg['sigma']:g}; one constant per L)\n{sub}", fontsize="small")
    for ax in axes:
        ax.legend(fontsize="x-small", loc="lower right" if ax is not axes[1] else "lower left")
        _no_minor_labels(ax)
    fig.suptitle("Grey band: settings inside the Theorem 3.4 regime (ReLU), where the slope is fitted (black line; "
                 f"theory ranges are for this slope). Units with w < {floor:g} are drawn at {floor:g}",
                 fontsize="small")
    return fig


def _annotate_fit(ax, f: dict, var: str) -> str:
    """Shade the regime, draw the fitted line(s); returns a subtitle with the slope and both theory ranges."""
    x_in = f.x
    _shade_regime(ax, x_in)
    rs, rl = f.ranges["sketch"], f.ranges["slides"]
    ranges = f"theory: sketch [{rs[0]:.2f}, {rs[1]:.2f}], slides [{rl[0]:.2f}, {rl[1]:.2f}]"
    if f.fit is not None:
        fit = f.fit
        head = f"fitted slope {fit.slope:.2f} ± {fit.stderr:.2f} (optimum {f.fit_pop.slope:.2f})"
    if f.fit is None:
        return f"too few settings inside the regime; {ranges}"
    fit = f.fit
    groups = [None] if f.groups is None else sorted(set(f.groups))
    for g in groups:
        xg = x_in if g is None else x_in[np.asarray(f.groups) == g]
        if len(xg) == 0:
            continue
        xs = np.geomspace(xg.min(), xg.max(), 20)
        ax.plot(xs, fit.predict(xs, g), color="k", lw=1.8, zorder=4)
    ax.plot([], [], color="k", lw=1.8, label=f"fit in regime: slope {fit.slope:.2f} ± {fit.stderr:.2f}")
    return f"{head}\n{ranges}"


def plot_regime(run: Run, a: Analysis):
    """Trained w of every ReLU unit against s = n L^2 / sigma^2 over the population curves w*(s) of their n."""
    cfg, units = run.cfg, a.units
    fig, ax = plt.subplots(1, 1, figsize=(7.0, 4.6))
    ns = sorted(a.trained_curves)
    cmap = plt.cm.plasma(np.linspace(0.05, 0.8, len(ns)))
    col = dict(zip(ns, cmap))
    for n in ns:
        c = a.trained_curves[n]
        ax.plot(c.s, c.w, color=col[n], lw=1.2, label=f"optimum, n = {n}")
        ax.axhline(c.w_sat, color=col[n], lw=0.7, ls=":")
    for key in ("iso", "n"):
        u = units[key]
        relu = np.array([c["function_class"] == "relu" for c in u.configs])
        for n in ns:
            m = relu & np.array([c["n"] == n for c in u.configs])
            ax.scatter(u.snr[m], np.maximum(u.w[m], cfg["w_min"]), color=col[n], s=18, zorder=3)
    ax.scatter([], [], color="0.3", s=18, label="trained units")
    ax.plot([], [], color="0.3", ls=":", lw=0.7, label="noiseless limit (saturation)")
    ax.set(xscale="log", yscale="log", xlabel="n L² / σ²", ylabel="window scale w",
           title="ReLU, isotropic: trained units over the population optimum", ylim=(cfg["w_min"], None))
    ax.legend(fontsize="x-small", loc="upper left")
    return fig


RANGE_COLORS = {"slides": "#9467bd", "sphere": "#2ca02c", "sketch": "#d62728"}


def plot_theorem34(run: Run, t: Theorem34, big: TrainedLargeN):
    """Top: local exponent of the population optimum against s for every n, one panel per d, with the three ranges;
    dots at s = n (L/sigma)^2 of the chapter. Bottom: the noise term against w; trained units at large n."""
    ds = t.ds
    fig, axes = plt.subplots(2, max(len(ds), 2), figsize=(4.6 * max(len(ds), 2), 8.2), squeeze=False)
    ncol = plt.cm.viridis(np.linspace(0.0, 0.9, len(t.ns)))
    for ax, d in zip(axes[0], ds):
        for v in ("slides", "sphere", "sketch"):
            lo, hi = th.theorem34_exponents(d, v)
            ax.axhspan(lo, hi, color=RANGE_COLORS[v], alpha=0.13, lw=0, label=f"{v} [{lo:.3f}, {hi:.3f}]")
        for n, cl in zip(t.ns, ncol):
            c = t.curves[(d, n)]
            ax.plot(c.s, c.slope, color=cl, lw=1.2, label=f"n = {n}")
            ax.plot([n * t.rho_check], [t.exponent[(d, n, t.rho_check)]], "o", color=cl, ms=5, mec="k", mew=0.6)
        ax.set(xscale="log", xlabel="s = n L² / σ²", ylabel="local exponent d log w* / d log s", ylim=(-0.05, 1.05),
               title=f"d = {d} (dots: L/σ = {t.rho_check ** 0.5:g})")
        ax.legend(fontsize="xx-small", loc="upper right")
    for ax in axes[0, len(ds):]:
        ax.set_visible(False)
    ax = axes[1, 0]
    for d, cl in zip(ds, plt.cm.tab10(np.arange(len(ds)))):
        z = t.noise[d]
        ax.plot(z.w, z.mc, color=cl, lw=1.2, label=f"d = {d}: Monte Carlo, n = {z.n}")
        ax.plot(z.w, z.limit, color=cl, lw=0.9, ls="--", label=f"d = {d}: n → ∞ (exponent {z.exponent:.2f} on "
                                                                  "[30, 300])")
    ax.axvspan(30, 300, color="0.9", lw=0, zorder=0)
    ax.set(xscale="log", yscale="log", xlabel="w  (M = w I)", ylabel="n E[Σ aᵢ²]",
           title="noise term: slope (d−1)/2 at large w, not d/2", ylim=(0.5, None))
    ax.legend(fontsize="xx-small", loc="upper left")
    ax = axes[1, 1]
    for d, mk in zip(ds, ("o", "s", "^", "D")):
        m = big.d == d
        ax.scatter(big.w_pop[m], big.w[m], marker=mk, s=24, color="C0", label=f"d = {d}: own L")
        ax.scatter(big.w_pop_other[m], big.w[m], marker=mk, s=24, facecolor="none", edgecolor="C3",
                   label=f"d = {d}: other L (control)")
    lim = np.array([min(big.w.min(), big.w_pop.min(), big.w_pop_other.min()) / 1.5,
                    max(big.w.max(), big.w_pop.max(), big.w_pop_other.max()) * 1.5])
    ax.plot(lim, lim, color="k", lw=0.8, zorder=1)
    ax.fill_between(lim, lim / W_RATIO_TOL, lim * W_RATIO_TOL, color="0.85", lw=0, zorder=0)   # under the points
    ax.set(xscale="log", yscale="log", xlim=lim, ylim=lim, xlabel="population-optimal w", ylabel="trained w",
           title=f"trained units at n = {run.cfg['t34_train_n']}")
    for axis in (ax.xaxis, ax.yaxis):          # plain numbers: "3×10⁰ 4×10⁰" labels ran into each other
        axis.set_major_formatter(mticker.FormatStrFormatter("%g"))
        axis.set_minor_formatter(mticker.FormatStrFormatter("%g"))
    ax.legend(fontsize="xx-small", loc="upper left")
    for ax in axes[1, 2:]:
        ax.set_visible(False)
    return fig


def plot_dynamics(run: Run, growths: list[Growth]):
    """||M||_2 against step from a small init with a small Adam step, one curve per L (seed mean)."""
    cfg = run.cfg
    Ls = cfg["dyn_L"]
    fig, axes = plt.subplots(len(growths), len(cfg["classes"]), figsize=(4.6 * len(cfg["classes"]), 3.4 * len(growths)),
                             sharex=True, squeeze=False)
    colors = _L_colors(Ls)
    for row, g in zip(axes, growths):
        for ax, cls in zip(row, cfg["classes"]):
            for L, col in zip(Ls, colors):
                idx = [i for i, c in enumerate(g.configs) if c["function_class"] == cls and math.isclose(c["L"], L)]
                ax.plot(g.steps, g.norm_history[:, idx].mean(1), color=col, lw=1.3, label=f"L = {L:g}")
            ax.axvspan(0, cfg["dyn_early"] * g.steps[-1], color="0.92", lw=0, zorder=0)
            ax.set(yscale="log", title=f"{cls}, {g.setting} inputs", xlabel="pretraining step", ylabel="‖M‖₂")
    axes[0, -1].legend(fontsize="x-small", loc="lower right")
    fig.suptitle(f"‖M‖₂ from init scale {cfg['dyn_init']:g} with Adam at lr {cfg['dyn_lr']:g} (mean of "
                 f"{cfg['seeds']} seeds); shaded: where the growth rate is measured", fontsize="small")
    return fig


def plot_scan(run: Run, a: Analysis):
    """Population loss over M = w I for some ReLU settings with the trained w marked; trained vs optimal w."""
    cfg, units = run.cfg, a.units
    wg, sc, rows = a.w_grid, a.scans.iso_scan, a.scans.iso_rows
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3))
    ax = axes[0]
    show = [L for L in cfg["L_values"] if L in (0.1, 0.3, 1.0, 10.0)] or cfg["L_values"][:: max(1, len(cfg["L_values"]) // 4)]
    colors = _L_colors(show)
    u = units["iso"]
    for L, col in zip(show, colors):
        i = next(k for k, r in enumerate(rows) if r["function_class"] == "relu" and math.isclose(r["L"], L)
                 and r["n"] == cfg["n"])
        loss = sc.bias[i] + cfg["sigma"] ** 2 * sc.noise[i]
        wb, lb = th.refine_minimum(wg, loss)
        ax.plot(wg, loss / lb, color=col, lw=1.3, label=f"L = {L:g}: optimum w* = {wb:.3g}")
        idx = [k for k, c in enumerate(u.configs) if c["function_class"] == "relu" and math.isclose(c["L"], L)
               and math.isclose(c["sigma"], cfg["sigma"])]
        for k in idx:
            ax.axvline(max(u.w[k], cfg["w_min"]), color=col, lw=0.9, ls="--")
    ax.plot([], [], color="0.4", ls="--", lw=0.9, label="trained w (each seed)")
    ax.set(xscale="log", yscale="log", xlabel="w  (M = w I)", ylabel="population loss / its minimum",
           title=f"ReLU, σ = {cfg['sigma']:g}, n = {cfg['n']}: loss over M = w I", ylim=(0.95, 20))
    ax.legend(fontsize="x-small", loc="upper left")
    ax = axes[1]
    for key, mk, lab in (("iso", "o", "isotropic (L and σ sweeps)"), ("n", "s", "isotropic (n sweep)"),
                         ("whitened", "^", "whitened tasks (M = w Σ⁻¹)"), ("full", "D", "full W_K, W_Q, W_V")):
        uu = units[key]
        wt = uu.w if key != "full" else a.block.w
        cls = np.array([c["function_class"] for c in uu.configs])
        for c in cfg["classes"]:
            m = cls == c
            ax.scatter(np.maximum(uu.w_pop[m], cfg["w_min"]), np.maximum(wt[m], cfg["w_min"]), marker=mk, s=18,
                       color=CLASS_COLORS[c], alpha=0.7, label=f"{lab}, {c}")
    lim = np.array([cfg["w_min"], 50])
    ax.plot(lim, lim, color="k", lw=0.8)
    ax.fill_between(lim, lim / W_RATIO_TOL, lim * W_RATIO_TOL, color="0.8", alpha=0.5, lw=0,
                    label=f"within a factor {W_RATIO_TOL}")
    ax.axvspan(cfg["w_min"], cfg["regime_w"], color="0.93", lw=0, zorder=0)
    ax.set(xscale="log", yscale="log", xlabel="population-optimal w (scan)", ylabel="trained w",
           title=f"trained against optimal w (shaded left of w = {cfg['regime_w']:g}: no window, not checked)",
           xlim=lim, ylim=lim)
    ax.legend(fontsize="xx-small", loc="upper left", ncol=1)
    return fig


def plot_covariance(run: Run, a: Analysis):
    """Covariance lemma: loss against the exponent p of M = w Sigma^-p; the trained M's diagonal against Sigma."""
    cfg, units, cov = run.cfg, a.units, a.cov
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    Lshow = cfg["L_sigma"] if cfg["L_sigma"] in whitened_L(cfg) else whitened_L(cfg)[-1]
    ax = axes[0]
    for key, ls in (("noniso", "-"), ("whitened", "--")):
        u = units[key]
        for c in cfg["classes"]:
            i = next(k for k, e in enumerate(u.configs) if e["function_class"] == c and math.isclose(e["L"], Lshow)
                     and e["seed"] == 0)
            lb = u.loss_by_p[i]
            ax.plot(P_GRID, lb / lb.min(), ls=ls, color=CLASS_COLORS[c], marker="o", ms=3,
                    label=f"{SETTING_LABEL[SETTING_OF[key]]}, {c}: p* = {u.p_star[i]:.2f}")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set(xlabel="exponent p  (M = w Σ⁻ᵖ, best w for each p)", ylabel="population loss / its minimum",
           title=f"Which direction is optimal? (L = {Lshow:g})", yscale="log")
    _no_minor_labels(ax)
    ax.legend(fontsize="xx-small")
    ax = axes[1]
    lam = np.sort(cov)
    for key, mk in (("noniso", "o"), ("whitened", "^")):
        u = units[key]
        for c in cfg["classes"]:
            i = next(k for k, e in enumerate(u.configs) if e["function_class"] == c and math.isclose(e["L"], Lshow)
                     and e["seed"] == 0)
            M = a.M[key][i]
            diag = np.diag(M)[np.argsort(cov)]
            ax.plot(lam, diag / np.exp(np.log(np.abs(diag)).mean()), marker=mk, ls="none", color=CLASS_COLORS[c],
                    label=f"{SETTING_LABEL[SETTING_OF[key]]}, {c}: p = {u.p_trained[i]:.2f}")
    for p, ls, lab in ((1.0, "-", "Σ⁻¹ (covariance lemma)"), (0.0, ":", "I (isotropic window)")):
        ref = lam ** -p
        ax.plot(lam, ref / np.exp(np.log(ref).mean()), color="k", ls=ls, lw=0.9, label=lab)
    ax.set(xscale="log", yscale="log", xlabel="eigenvalue of Σ", ylabel="diagonal of trained M (normalised)",
           title=f"Trained M along Σ's eigenvectors (L = {Lshow:g}, seed 0)")
    _no_minor_labels(ax)
    ax.legend(fontsize="xx-small")
    ax = axes[2]
    for key, mk in (("noniso", "o"), ("whitened", "^")):
        u = units[key]
        for c in cfg["classes"]:
            m = np.array([e["function_class"] == c for e in u.configs])
            ax.scatter(np.maximum(u.w_pop[m], cfg["w_min"]), u.dist_cov[m], marker=mk, color=CLASS_COLORS[c],
                       s=18, label=f"{SETTING_LABEL[SETTING_OF[key]]}, {c}")
    ax.axhline(COV_DIST_TOL, color="k", lw=0.8, ls="--", label=f"tolerance {COV_DIST_TOL}")
    ax.axhline(th.normalized_distance(np.eye(cfg["d"]), th.window_base(cfg["d"], "nonisotropic")), color="0.5",
               lw=0.8, ls=":", label="distance of I from Σ⁻¹")
    ax.axvspan(cfg["w_min"], cfg["regime_w"], color="0.93", lw=0, zorder=0)
    ax.set(xscale="log", xlabel="population-optimal w (M = w Σ⁻¹)", ylabel="‖M/‖M‖ − Σ⁻¹/‖Σ⁻¹‖‖_F",
           title="Distance of trained M from Σ⁻¹ (every unit)", xlim=(0.1, 50))
    ax.legend(fontsize="xx-small")
    return fig


def plot_full(run: Run, a: Analysis):
    """Heat maps of W_K^T W_Q and W_V of one full-parameter unit (ReLU, largest full_L, seed 0)."""
    cfg = run.cfg
    res_cfgs = a.units["full"].configs
    i = next(k for k, c in enumerate(res_cfgs) if c["function_class"] == cfg["classes"][0]
             and math.isclose(c["L"], cfg["full_L"][-1]) and c["seed"] == 0)
    A = a.block.A[i]
    d = cfg["d"]
    labels = [f"x{j + 1}" for j in range(d)] + ["y"]
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 4.2))
    vmax = np.abs(A).max()
    im = axes[0].imshow(A, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    axes[0].set_title(f"W_Kᵀ W_Q ({cfg['classes'][0]}, L = {cfg['full_L'][-1]:g}): w = {a.block.w[i]:.2f}, "
                      f"label row / x-block = {a.block.label_row_ratio[i]:.3f}", fontsize="small")
    fig.colorbar(im, ax=axes[0], shrink=0.8)
    WV = a.WV[i]
    vmax = np.abs(WV).max()
    im = axes[1].imshow(WV, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    axes[1].set_title(f"W_V: label weight {a.block.value_label[i]:.3f}, |x part| / label weight "
                      f"{a.block.value_x_ratio[i]:.3f}", fontsize="small")
    fig.colorbar(im, ax=axes[1], shrink=0.8)
    for ax in axes:
        ax.set_xticks(range(d + 1), labels)
        ax.set_yticks(range(d + 1), labels)
        ax.grid(False)
        ax.axhline(d - 0.5, color="k", lw=0.8)
        ax.axvline(d - 0.5, color="k", lw=0.8)
    axes[0].set(xlabel="query token coordinate", ylabel="key token coordinate")
    axes[1].set(xlabel="input token coordinate", ylabel="output coordinate (prediction: last row)")
    return fig


