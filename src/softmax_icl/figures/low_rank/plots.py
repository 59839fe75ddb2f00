"""Low rank: the figure's plots (plots only: nothing here is cached)."""

from __future__ import annotations

import numpy as np

from ... import plotting
from ...metrics import rho2
from ...plotting import MODEL_COLORS
from ...book.run import Run
from .analysis import LowRankAnalysis, subspace_alignment
from .claims import short
from .sweeps import MODELS

QUANTITIES = (("rho1", "ρ₁(M, B)"), ("rho2", "ρ₂(M, B)"), ("curve", "ICL error (MSE)"))
HEAT = dict(cmap="RdBu_r", vmin=-1, vmax=1)


def plot_dynamics(run: Run, a: LowRankAnalysis):
    """rho_1, rho_2 and ICL error (columns) against the pretraining step, one row per class; softmax vs linear
    (seed mean, min-max band), with the error of predicting 0, of the best M = w I (w tuned per seed: the seed mean
    of its error) and of the best M = c B B^T."""
    classes, steps = a.classes, a.log_steps
    fig, axes = plotting.subplots(len(classes), 3, row_height=1.7, sharex=True)
    for j, c in enumerate(classes):
        for ax, (key, ylabel) in zip(axes[j], QUANTITIES):
            for m in MODELS:
                plotting.band(ax, steps, getattr(a.model(m), key)[:, j], MODEL_COLORS[m], f"{m} attention")
            ax.set(title=short(c), ylabel=ylabel)
        ax = axes[j, 2]
        ax.axhline(a.zero_curve_set[j], color="0.5", ls=":", lw=1, label="predict 0")
        ax.axhline(a.oracle_wI_curve_set[j].mean(), color="0.4", ls="-.", lw=1, label="best M = w I")
        ax.axhline(a.oracle_cBB_curve_set[j], color="k", ls="--", lw=1, label="best M = c B Bᵀ")
        for ax in axes[j]:
            plotting.log_axis(ax)
    for ax in axes[-1]:
        ax.set_xlabel("pretraining step")
    plotting.figure_legend(fig, ncols=3)
    return fig


def _heatmap(ax, M, title: str, note: str | None = None):
    """``M`` scaled to max |entry| = 1, without ticks; ``note`` under it."""
    im = ax.imshow(M / np.abs(M).max(), **HEAT)
    ax.set(title=title, xticks=[], yticks=[])
    if note:
        ax.set_xlabel(note)
    ax.grid(False)
    return im


def _note(M, B) -> str:
    return f"ρ₂ = {rho2(M, B):.2f}, cos = {subspace_alignment(M, B):.2f}"


def plot_headline(run: Run, a: LowRankAnalysis, seed: int = 0):
    """The answer, on the last class: the learned M of a softmax unit has the shape of B B^T (the tasks'
    subspace); a linear unit's does not. Each matrix scaled to max |entry| = 1; under it rho_2(M, B) and the cosine
    of M with B B^T."""
    c, B = len(a.classes) - 1, a.B
    fig, axes = plotting.subplots(1, 3, row_height=2.6)
    im = _heatmap(axes[0, 0], B @ B.T, "B Bᵀ (target shape)")
    for ax, m in zip(axes[0, 1:], MODELS):
        M = a.model(m).M[c, seed]
        _heatmap(ax, M, f"{m} M, {short(a.classes[c])} tasks", _note(M, B))
    fig.colorbar(im, ax=axes, shrink=0.8, label="entry / max |entry|")
    return fig


def plot_matrices(run: Run, a: LowRankAnalysis, seed: int = 0):
    """B B^T and the initial M (top row), then the learned M of each class (rows), softmax (left) and linear
    (right); each scaled to max |entry| = 1, with rho_2(M, B) and cos(M, B B^T) under it."""
    classes, B = a.classes, a.B
    fig, axes = plotting.subplots(len(classes) + 1, 2, width=0.6, row_height=2.0)
    im = _heatmap(axes[0, 0], B @ B.T, "B Bᵀ (target shape)")
    _heatmap(axes[0, 1], a.softmax.M0[0, seed], "M at initialisation")
    for j, c in enumerate(classes):
        for ax, m in zip(axes[j + 1], MODELS):
            M = a.model(m).M[j, seed]
            _heatmap(ax, M, f"{m}, {short(c)}", _note(M, B))
    fig.colorbar(im, ax=axes, shrink=0.4, location="top", label="entry / max |entry|")
    return fig
