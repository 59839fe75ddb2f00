"""Low rank: the figure's plots (plots only: nothing here is cached)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...metrics import rho2
from ...plotting import MODEL_COLORS
from ...records import Run
from .analysis import LowRankAnalysis, subspace_alignment
from .claims import short
from .sweeps import MODELS


def _band(ax, steps, v, color, label):
    ax.plot(steps, v.mean(-1), color=color, label=label)
    if v.shape[-1] > 1:
        ax.fill_between(steps, v.min(-1), v.max(-1), color=color, alpha=0.2, lw=0)


def plot_dynamics(run: Run, a: LowRankAnalysis):
    """rho_1, rho_2 and ICL error against the pretraining step, per class; softmax vs linear."""
    classes, steps = a.classes, a.log_steps
    fig, axes = plt.subplots(3, len(classes), figsize=(3.1 * len(classes), 7.6), sharex=True, squeeze=False)
    for j, c in enumerate(classes):
        for m in MODELS:
            for r, key in enumerate(("rho1", "rho2", "curve")):
                _band(axes[r, j], steps, getattr(a.model(m), key)[:, j], MODEL_COLORS[m], f"{m} attention")
        ax = axes[2, j]
        ax.axhline(a.zero_curve_set[j], color="0.5", ls=":", lw=1, label="predict 0")
        ax.axhline(a.oracle_wI_curve_set[j], color="0.4", ls="-.", lw=1, label="best M = wI")
        ax.axhline(a.oracle_cBB_curve_set[j], color="k", ls="--", lw=1, label="best M = cBBᵀ")
        axes[0, j].set_title(f"{short(c)}")
        axes[0, j].set(yscale="log", ylabel="ρ₁(M, B)" if j == 0 else None)
        axes[1, j].set(yscale="log", ylabel="ρ₂(M, B)" if j == 0 else None)
        ax.set(yscale="log", xlabel="pretraining step", ylabel="ICL error (MSE)" if j == 0 else None)
    axes[0, 0].legend(fontsize="x-small")
    axes[2, 0].legend(fontsize="x-small", loc="best")
    fig.suptitle(f"Representation error and ICL error during pretraining (d = {run.cfg['d']}, k = {run.cfg['k']}, "
                 f"n = {run.cfg['n']}, σ = {run.cfg['sigma']:g}; band: min-max over seeds)", fontsize="small")
    return fig


def plot_matrices(run: Run, a: LowRankAnalysis, seed: int = 0):
    """Heat maps of B B^T and the learned M of each class (softmax top, linear bottom), each scaled to max |.| = 1."""
    classes, B = a.classes, a.B
    fig, axes = plt.subplots(2, len(classes) + 1, figsize=(2.5 * (len(classes) + 1), 5.0), squeeze=False)
    kw = dict(cmap="RdBu_r", vmin=-1, vmax=1)

    def show(ax, M, title):
        im = ax.imshow(M / np.abs(M).max(), **kw)
        ax.set_title(title, fontsize="small")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
        return im

    show(axes[0, 0], B @ B.T, "B Bᵀ (target shape)")
    show(axes[1, 0], a.softmax.M0[0, seed], "M at initialisation")
    for j, c in enumerate(classes):
        for r, m in enumerate(MODELS):
            M = a.model(m).M[j, seed]
            im = show(axes[r, j + 1], M, f"{m}, {short(c)}\nρ₂ = {rho2(M, B):.2f}, cos = "
                      f"{subspace_alignment(M, B):.2f}")
    fig.colorbar(im, ax=axes, shrink=0.6, label="entry / max |entry|")
    return fig
