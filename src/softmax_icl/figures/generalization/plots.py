"""Generalisation: the figure's plots (plots only: nothing here is cached).

Colour is the pretraining class (:data:`CLASS_COLORS`) where units pretrained at the test L are compared, and the
pretraining L (:func:`~softmax_icl.plotting.sequential`) where units of one class pretrained at other L are.
"""

from __future__ import annotations

import numpy as np

from ... import plotting
from ...plotting import MODEL_COLORS, QUALITATIVE
from ...book.run import Run
from .analysis import GeneralizationAnalysis, index_of, two_branch_fit

CLASS_COLORS = {"affine": QUALITATIVE[0], "relu": QUALITATIVE[1], "cosine": QUALITATIVE[2]}
L_STYLES = (":", "-", "--")
ERROR_LABEL = "ICL error (MSE)"


def _refs(ax, a: GeneralizationAnalysis, t: int) -> None:
    """The matched linear unit, the best-bandwidth oracle and the pretraining n on test class ``t``'s axis."""
    ax.plot(a.n, a.linear[t, :, t].mean(0), color=MODEL_COLORS["linear"], ls="-.", lw=1.2,
            label="linear attention (matched)")
    ax.plot(a.n, a.oracle[t], color="k", ls="--", lw=1, label="best-bandwidth NW")
    ax.axvline(a.n_train, color="0.6", lw=0.8, ls=":", label=f"pretraining n = {a.n_train}")
    ax.set(xscale="log", xlabel="test context length n")
    plotting.value_ticks(ax, a.n)
    plotting.log_axis(ax)


def _matched(ax, a: GeneralizationAnalysis, t: int) -> None:
    """Units pretrained on each class at the test L, tested on class ``t``."""
    lt = index_of(a.L, a.L_test)
    for p, pc in enumerate(a.classes):
        plotting.band(ax, a.n, a.softmax[p, lt, :, t], CLASS_COLORS.get(pc), label=f"pretrained on {pc}, L = "
                      f"{a.L_test:g}", axis=0, marker="o", ms=3)
    _refs(ax, a, t)


def _mismatched(ax, run: Run, a: GeneralizationAnalysis) -> None:
    """Units of the mismatch class pretrained at every other L, and the reference class's at the test L, tested on
    the mismatch class."""
    cfg, classes, lt = run.cfg, a.classes, index_of(a.L, a.L_test)
    t = p_mis = index_of(classes, cfg["mismatch_class"])
    p_ref = index_of(classes, cfg["reference_class"])
    plotting.band(ax, a.n, a.softmax[p_ref, lt, :, t], CLASS_COLORS.get(cfg["reference_class"]), axis=0,
                  label=f"pretrained on {cfg['reference_class']}, L = {a.L_test:g}", marker="o", ms=3)
    for li, (L, color) in enumerate(zip(a.L, plotting.sequential(len(a.L)))):
        if li != lt:
            plotting.band(ax, a.n, a.softmax[p_mis, li, :, t], color, axis=0, marker="s", ms=3,
                          label=f"pretrained on {cfg['mismatch_class']}, L = {L:g}")
    _refs(ax, a, t)


def plot_headline(run: Run, a: GeneralizationAnalysis):
    """The answer, on the mismatch class at the test L: units pretrained at the same L on any class reach the same
    error (left); units pretrained on the class itself at another L do not (right). Seed mean, min-max band."""
    fig, axes = plotting.subplots(1, 2, row_height=3.2, sharey=True)
    cls = run.cfg["mismatch_class"]
    _matched(axes[0, 0], a, index_of(a.classes, cls))
    _mismatched(axes[0, 1], run, a)
    axes[0, 0].set(title=f"same L, any class (test: {cls})", ylabel=ERROR_LABEL)
    axes[0, 1].set_title(f"other L, same class (test: {cls})")
    plotting.figure_legend(fig, ncols=2)
    return fig


def plot_figure(run: Run, a: GeneralizationAnalysis):
    """Paper Fig. 5(a): ICL error of units pretrained on each class at the test L against the test context length,
    one panel per test class (seed mean, min-max band)."""
    fig, axes = plotting.subplots(1, len(a.classes), row_height=2.9, sharey=True)
    for t, (ax, tc) in enumerate(zip(axes[0], a.classes)):
        _matched(ax, a, t)
        ax.set_title(f"test: {tc}, L = {a.L_test:g}")
    axes[0, 0].set_ylabel(ERROR_LABEL)
    plotting.figure_legend(fig, ncols=2)
    return fig


def plot_grid(run: Run, a: GeneralizationAnalysis):
    """Every unit (row: pretraining class and L) on every test class (column) at the pretraining n and the test L:
    ICL error over the best-bandwidth oracle's."""
    classes, Ls = a.classes, a.L
    j_tr = index_of(a.n, a.n_train)
    err = a.softmax.mean(2)[..., j_tr]                                      # (P, nL, T)
    ratio = (err / a.oracle[None, None, :, j_tr]).reshape(len(classes) * len(Ls), len(classes))
    fig, axes = plotting.subplots(1, 1, width=0.8, row_height=3.6)
    ax = axes[0, 0]
    log_ratio = np.log10(ratio)
    im = ax.imshow(log_ratio, cmap="magma_r", vmin=0, vmax=max(1.0, log_ratio.max()), aspect="auto")
    for (i, j), r in np.ndenumerate(ratio):
        ax.text(j, i, f"{r:.2g}", ha="center", va="center", color="w" if log_ratio[i, j] > 0.5 else "k")
    ax.set_xticks(range(len(classes)), [f"test {c}" for c in classes])
    ax.set_yticks(range(ratio.shape[0]), [f"{c}, L = {L:g}" for c in classes for L in Ls])
    ax.set(ylabel="pretrained on", title=f"error / oracle's at n = {a.n_train}, test L = {a.L_test:g}")
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="log₁₀(error / oracle's)")
    return fig


def plot_windows(run: Run, a: GeneralizationAnalysis):
    """Left: ||M||_2 (the inverse window width) of every softmax unit during pretraining (seed mean; colour: class,
    line style: pretraining L). Right: the mismatch class's pretraining loss along M = w I at each pretraining L,
    with the pretrained units' tr(M)/d marked at the bottom (one tick per seed)."""
    cfg, classes, Ls = run.cfg, a.classes, a.L
    fig, axes = plotting.subplots(1, 2, row_height=3.1)
    ax = axes[0, 0]
    for p, c in enumerate(classes):
        for li, ls in zip(range(len(Ls)), L_STYLES):
            ax.plot(a.log_steps, a.M_norm_history[p, li].mean(-1), color=CLASS_COLORS.get(c), ls=ls)
    ax.set(xlabel="pretraining step", ylabel="‖M‖₂", title="window during pretraining")
    plotting.log_axis(ax)
    ax = axes[0, 1]
    p_mis = index_of(classes, cfg["mismatch_class"])
    color = CLASS_COLORS.get(cfg["mismatch_class"])
    lo = a.landscape.min()
    for li, (L, ls) in enumerate(zip(Ls, L_STYLES)):
        ax.plot(a.landscape_w, a.landscape[li], color=color, ls=ls)
        ax.plot(a.w_signed[p_mis, li], np.full(a.w_signed.shape[-1], lo * 0.8), ls="none", marker="|", ms=10,
                mew=1.5, color=color)
    ax.set(xlabel="w in M = w I (signed)", ylabel="pretraining loss (MSE)",
           title=f"{cfg['mismatch_class']} loss along M = w I")
    ax.set_xscale("symlog", linthresh=0.1)
    lo, hi = ax.get_xlim()
    ax.set_xticks([v for v in (-1e4, -100, -1, 0, 1, 100, 1e4) if lo <= v <= hi])
    ax.xaxis.set_major_formatter("{x:g}")
    plotting.log_axis(ax)
    for c in classes:
        ax.plot([], [], color=CLASS_COLORS.get(c), label=c)
    for L, ls in zip(Ls, L_STYLES):
        ax.plot([], [], color="0.3", ls=ls, label=f"L = {L:g}")
    ax.plot([], [], color="0.3", ls="none", marker="|", ms=8, mew=1.5, label="pretrained units (tr M / d)")
    plotting.figure_legend(fig, ncols=4)
    return fig


def plot_theory(run: Run, a: GeneralizationAnalysis):
    """Theorem 3.5, one row per d. Left: error at the largest n against the test L' of units pretrained at a small
    L (pink) and at L_test (blue), with the fitted two-branch curves a L'^2 + b and their crossovers (dotted), and
    the re-tuned oracle. Right: error against n at L' = L_test of units pretrained at each n, of the small-L unit
    pretrained at the largest n, the oracle, and the theorem's matched bound (constant 1)."""
    colors = (QUALITATIVE[3], QUALITATIVE[0])
    fig, axes = plotting.subplots(len(a.theory), 2, row_height=2.6)
    for row, th in zip(axes, a.theory):
        ax = row[0]
        aa, bb = two_branch_fit(th.L_prime, th.at_nmax.mean(1))
        grid = np.geomspace(th.L_prime[0], th.L_prime[-1], 200)
        for u, L in enumerate(th.L_unit):
            ax.plot(th.L_prime, th.at_nmax[u].mean(0), "o", color=colors[u], label=f"pretrained at L = {L:g}")
            ax.plot(grid, aa[u] * grid**2 + bb[u], "-", color=colors[u], lw=1, alpha=0.8)
            ax.axvline(np.sqrt(bb[u] / aa[u]), color=colors[u], ls=":", lw=1)
        ax.plot(th.L_prime, th.oracle[:, -1], "k--", lw=1, label="best-bandwidth NW (re-tuned)")
        ax.set(xscale="log", xlabel="test Lipschitz constant L'", ylabel=ERROR_LABEL,
               title=f"d = {th.d}, n = {th.n[-1]}")
        plotting.log_axis(ax)
        ax = row[1]
        f1 = index_of(th.L_prime, th.L_unit[1])
        r = th.matched_rate(f1)
        ax.plot(th.n, r.mean(0), "-", color=colors[1], label=f"pretrained at L = {th.L_unit[1]:g} and at each n")
        ax.plot(th.n, th.error[0, -1, :, f1, :].mean(0), "s-", color=colors[0], ms=3,
                label=f"pretrained at L = {th.L_unit[0]:g} and the largest n")
        ax.plot(th.n, th.oracle[f1], "k--", lw=1)
        ax.plot(th.n, th.bound, color="0.5", ls="-.", lw=1,
                label=r"theorem's bound $L^{2-2/(d+2)}(\sigma^2/n)^{1/(d+2)}$")
        ax.set(xscale="log", xlabel="context length n", title=f"d = {th.d}, L' = {th.L_unit[1]:g}")
        plotting.value_ticks(ax, th.n)
        plotting.log_axis(ax)
    axes[0, 0].plot([], [], color="0.4", lw=1, label="fit a L'² + b")
    axes[0, 0].plot([], [], color="0.4", lw=1, ls=":", label="crossover √(b/a)")
    plotting.figure_legend(fig, ncols=2)
    return fig
