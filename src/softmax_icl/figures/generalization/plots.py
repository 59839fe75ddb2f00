"""Generalisation: the figure's plots (plots only: nothing here is cached)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...plotting import MODEL_COLORS
from ...records import Run
from .analysis import GeneralizationAnalysis, index_of, two_branch_fit

CLASS_COLORS = {"affine": "#0072b2", "relu": "#e69f00", "cosine": "#009e73"}
L_STYLES = {0: (":", "v"), 1: ("-", "o"), 2: ("--", "s")}


def _band(ax, ns, e, color, **kw):
    ax.plot(ns, e.mean(0), color=color, **kw)
    if e.shape[0] > 1:
        ax.fill_between(ns, e.min(0), e.max(0), color=color, alpha=0.18, lw=0)


def _refs(ax, a, t):
    ns = a.n
    ax.plot(ns, a.linear[t, :, t].mean(0), color=MODEL_COLORS["linear"], ls="-.", lw=1.2,
            label="linear attention (matched)")
    ax.plot(ns, a.oracle[t], color="k", ls="--", lw=1, label="best-bandwidth NW")
    ax.axvline(a.n_train, color="0.6", lw=0.8, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="test context length n", ylabel="ICL error (MSE)")
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.minorticks_off()


def plot_figure(run: Run, a: GeneralizationAnalysis):
    """Panel (a): one axis per test class; panel (b): L mismatch on the mismatch class."""
    cfg = run.cfg
    classes, Ls = a.classes, a.L
    lt = index_of(Ls, a.L_test)
    fig, axes = plt.subplots(1, len(classes) + 1, figsize=(3.3 * (len(classes) + 1), 3.5), sharey=True)
    for t, tc in enumerate(classes):
        ax = axes[t]
        for p, pc in enumerate(classes):
            _band(ax, a.n, a.softmax[p, lt, :, t], CLASS_COLORS.get(pc, None), marker="o", ms=3,
                  label=f"pretrained on {pc}")
        _refs(ax, a, t)
        ax.set_title(f"(a) test: {tc}, L = {a.L_test:g}")
    ax = axes[-1]
    t = index_of(classes, cfg["mismatch_class"])
    p_ref, p_mis = index_of(classes, cfg["reference_class"]), index_of(classes, cfg["mismatch_class"])
    _band(ax, a.n, a.softmax[p_ref, lt, :, t], CLASS_COLORS.get(cfg["reference_class"]), marker="o", ms=3,
          label=f"{cfg['reference_class']}, L = {a.L_test:g}")
    colors = plt.cm.plasma(np.linspace(0.1, 0.75, len(Ls)))
    for li, L in enumerate(Ls):
        if li == lt:
            continue
        _band(ax, a.n, a.softmax[p_mis, li, :, t], colors[li], marker="s", ms=3,
              label=f"{cfg['mismatch_class']}, L = {L:g}")
    _refs(ax, a, t)
    ax.set_title(f"(b) test: {cfg['mismatch_class']}, L = {a.L_test:g}")
    axes[0].legend(fontsize="x-small", loc="lower left")
    ax.legend(fontsize="x-small", loc="lower left", title="pretrained on", title_fontsize="x-small")
    fig.suptitle(f"ICL error of pretrained softmax units against the test context length (d = {cfg['d']}, "
                 f"σ = {cfg['sigma']:g}; dotted line: pretraining n = {a.n_train}; band: min-max over seeds)",
                 fontsize="small")
    return fig


def plot_grid(run: Run, a: GeneralizationAnalysis):
    """Every unit on every test class at n_train (relative to the oracle), ||M|| during pretraining, and the
    mismatch class's pretraining loss along M = w I with the pretrained units marked."""
    classes, Ls = a.classes, a.L
    j_tr = index_of(a.n, a.n_train)
    err = a.softmax.mean(2)[..., j_tr]                                      # (P, nL, T)
    ratio = (err / a.oracle[None, None, :, j_tr]).reshape(len(classes) * len(Ls), len(classes))
    labels = [f"{c}, L = {L:g}" for c in classes for L in Ls]
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.9), gridspec_kw={"width_ratios": [1, 1.2, 1.1]})
    ax = axes[0]
    im = ax.imshow(np.log10(ratio), cmap="magma_r", vmin=0, vmax=max(1.0, np.log10(ratio).max()), aspect="auto")
    for i in range(ratio.shape[0]):
        for j in range(ratio.shape[1]):
            ax.text(j, i, f"{ratio[i, j]:.2g}", ha="center", va="center", fontsize="x-small",
                    color="w" if np.log10(ratio[i, j]) > 0.5 else "k")
    ax.set_xticks(range(len(classes)), [f"test {c}" for c in classes])
    ax.set_yticks(range(len(labels)), [f"pretrained {s}" for s in labels], fontsize="x-small")
    ax.grid(False)
    ax.set_title(f"ICL error / oracle error at n = {a.n_train}, test L = {a.L_test:g}")
    fig.colorbar(im, ax=ax, label="log10(error / oracle)")
    ax = axes[1]
    for p, c in enumerate(classes):
        for li, L in enumerate(Ls):
            ls, _ = L_STYLES.get(li, ("-", "o"))
            h = a.M_norm_history[p, li]                                   # (T, S)
            ax.plot(a.log_steps, h.mean(-1), color=CLASS_COLORS.get(c), ls=ls, label=f"{c}, L = {L:g}")
    ax.set(yscale="log", xlabel="pretraining step", ylabel="‖M‖₂ (inverse window width)",
           title="Window learned during pretraining")
    ax.legend(fontsize="x-small", ncol=len(classes), loc="lower right")
    ax = axes[2]
    cfg = run.cfg
    p_mis = index_of(classes, cfg["mismatch_class"])
    colors = plt.cm.plasma(np.linspace(0.1, 0.75, len(Ls)))
    lo = a.landscape.min()
    for li, L in enumerate(Ls):
        ax.plot(a.landscape_w, a.landscape[li], color=colors[li], label=f"L = {L:g}")
        for w in a.w_signed[p_mis, li]:                                   # the pretrained units (one per seed)
            ax.plot([w], [lo * 0.8], marker="|", ms=12, mew=2, color=colors[li])
    ax.set(xscale="symlog", yscale="log", xlabel="w in M = w I (signed; ticks: pretrained units, tr(M)/d)",
           ylabel="pretraining loss (MSE)", title=f"{cfg['mismatch_class']} pretraining loss along M = wI "
           f"(n = {a.n_train})")
    ax.set_xscale("symlog", linthresh=0.1)
    ax.legend(fontsize="x-small")
    return fig


def plot_theory(run: Run, a: GeneralizationAnalysis):
    """Theorem 3.5 at every d: error against the test L' (units pretrained at a small L and at L_test, with the
    fitted two-branch curves a L'^2 + b, and the re-tuned oracle), and error against n (matched units, the
    control unit, the oracle, and the theorem's rate)."""
    fig, axes = plt.subplots(1, 2 * len(a.theory), figsize=(4.2 * 2 * len(a.theory), 3.6), squeeze=False)
    colors = ("#cc79a7", "#0072b2")
    for k, th in enumerate(a.theory):
        ax = axes[0, 2 * k]
        aa, bb = two_branch_fit(th.L_prime, th.at_nmax.mean(1))
        grid = np.geomspace(th.L_prime[0], th.L_prime[-1], 200)
        for u, L in enumerate(th.L_unit):
            e = th.at_nmax[u]                                                # (S, F)
            ax.plot(th.L_prime, e.mean(0), "o", color=colors[u], label=f"pretrained L = {L:g}")
            ax.plot(grid, aa[u] * grid**2 + bb[u], "-", color=colors[u], lw=1, alpha=0.8)
            ax.axvline(np.sqrt(bb[u] / aa[u]), color=colors[u], ls=":", lw=1)
        ax.plot(th.L_prime, th.oracle[:, -1], "k--", lw=1, label="best-bandwidth NW (re-tuned)")
        ax.set(xscale="log", yscale="log", xlabel="test Lipschitz constant L'", ylabel="ICL error (MSE)",
               title=f"d = {th.d}, n = {th.n[-1]}: error vs test L'")
        ax.legend(fontsize="x-small")
        ax = axes[0, 2 * k + 1]
        f1 = index_of(th.L_prime, th.L_unit[1])
        r = th.matched_rate(f1)
        ax.plot(th.n, r.mean(0), "o-", color=colors[1], label=f"pretrained at L = {th.L_unit[1]:g} and at each n")
        ax.plot(th.n, th.error[0, -1, :, f1, :].mean(0), "s-", color=colors[0],
                label=f"pretrained at L = {th.L_unit[0]:g}, n = {th.n[-1]}")
        ax.plot(th.n, th.oracle[f1], "k--", lw=1, label="best-bandwidth NW (re-tuned)")
        ns = np.asarray(th.n, dtype=float)
        ax.plot(ns, r.mean(0)[0] * (ns / ns[0]) ** (-1.0 / (th.d + 2)), color="0.5", ls="-.", lw=1,
                label="theorem's rate n^(-1/(d+2))")
        ax.set(xscale="log", yscale="log", xlabel="context length n (pretraining and test)",
               ylabel="ICL error (MSE)", title=f"d = {th.d}: error vs n at L' = {th.L_unit[1]:g}")
        ax.set_xticks(th.n, [str(n) for n in th.n])
        ax.minorticks_off()
        ax.legend(fontsize="x-small")
    return fig
