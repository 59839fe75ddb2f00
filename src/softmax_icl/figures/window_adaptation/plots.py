"""Window adaptation: the figure's plots (plots only: nothing here is cached).

A setting's colour is its L (ordered, :func:`~softmax_icl.plotting.sequential`), its line style its noise level, in
every figure of the chapter.
"""

from __future__ import annotations

import numpy as np
import torch

from ... import plotting
from ...base import derive_seed
from ...metrics import spectral_norm, window_profile
from ...plotting import MODEL_COLORS
from ...book.run import Run
from ...tasks import InputSpec, draw_raw, evaluate_class
from ...training import SweepResult
from .analysis import WindowAnalysis
from .sweeps import MODELS, Setting, settings, unit_index

FAMILY_LABEL = ("paper's tasks", "zero-mean tasks")
ANGLE_LABEL = "angle to the query (degrees)"


def setting_styles(sets: list[Setting]) -> list[dict]:
    """Line colour (one per L, in order) and style (solid at the smallest noise, dashed above) of each setting."""
    Ls = sorted({s.L for s in sets})
    sigma0 = min(s.sigma for s in sets)
    colors = dict(zip(Ls, plotting.sequential(len(Ls))))
    return [dict(color=colors[s.L], ls="-" if s.sigma == sigma0 else "--") for s in sets]


def example_context(cfg: dict, s: Setting, seed: int, n: int):
    """One task of the setting: context inputs, noisy labels, query, and f on a fine grid (d = 2 angles)."""
    spec = InputSpec(d=cfg["d"])
    g = torch.Generator().manual_seed(derive_seed(seed, 17))
    raw = draw_raw(spec, 1, n, g, "cpu")
    raw1 = {k: v.unsqueeze(0) for k, v in raw.items()}
    L = torch.tensor([s.L])
    f = evaluate_class(cfg["function_class"], raw1["x"], raw1, L)[0, 0]
    y = f[:n] + s.sigma * raw["noise"][0]
    x = raw["x"][0]
    xq = x[n]
    grid = np.linspace(-np.pi, np.pi, 721)
    # points on the great circle through the query (for d = 2 this is the whole input space)
    v = torch.randn(cfg["d"], generator=g)
    v = v - (v @ xq) * xq
    v = v / v.norm()
    pts = torch.tensor(np.cos(grid), dtype=torch.float32)[:, None] * xq + torch.tensor(np.sin(grid), dtype=torch.float32)[:, None] * v
    f_grid = evaluate_class(cfg["function_class"], pts[None, None], {k: v_[:, :1] for k, v_ in raw1.items()}, L)[0, 0]
    cosang = (x[:n] @ xq).clamp(-1, 1)
    sign = torch.sign(x[:n] @ v)
    sign[sign == 0] = 1
    angle = sign * torch.arccos(cosang)
    return dict(angle=angle.numpy(), y=y.numpy(), f_q=float(f[n]), grid=grid, f_grid=f_grid.numpy())


def _draw_windows(axes, run: Run, a: WindowAnalysis, results: dict[str, SweepResult]) -> None:
    """The attention window of the pretrained softmax and linear units (one axis each) in every setting: attention
    weight against the angle to the query, relative to the weight on the query and averaged over queries
    (:func:`~softmax_icl.metrics.window_profile`), units at ``n_window`` on the paper's tasks, seed mean and min-max
    band; each line labelled with its setting and the softmax window's half-width."""
    thetas = np.linspace(0, np.pi, 181)
    angle = np.degrees(np.concatenate([-thetas[:0:-1], thetas]))
    for ax, m in zip(axes, MODELS):
        for j, (s, style) in enumerate(zip(a.settings, setting_styles(a.settings))):
            M = results[m].M[unit_index(results[m], s, run.cfg["n_window"], a.families[0])]
            prof = window_profile(m, M, thetas)                                   # (seed, theta)
            prof = np.concatenate([prof[:, :0:-1], prof], axis=1)
            plotting.band(ax, angle, prof, label=f"{s.label} ({a.halfwidth['softmax'][0, j].mean():.0f}°)",
                          axis=0, **style)
        ax.axhline(0, color="0.6", lw=0.6)
        ax.set(title=f"{m} attention", xlabel=ANGLE_LABEL, xlim=(-180, 180), xticks=[-180, -90, 0, 90, 180])
    axes[0].set(ylabel="weight / weight at query", ylim=(-1.05, 1.1))


def plot_figure1(run: Run, a: WindowAnalysis, results: dict[str, SweepResult]):
    """The paper's Figure 1 as the paper lays it out, three rows in one figure: one task at each $L$ of the low-noise
    settings (top), the attention window of the pretrained softmax and linear units in every setting (middle, as
    :func:`_draw_windows`), and their ICL error against the context length on the paper's tasks beside the tuned
    Nadaraya-Watson window (bottom, as :func:`plot_error`)."""
    import matplotlib.pyplot as plt

    cfg = run.cfg
    low = [j for j, s in enumerate(a.settings) if s.sigma == min(x.sigma for x in a.settings)][:3]
    styles = setting_styles(a.settings)
    fig = plt.figure(figsize=(plotting.COLUMN_WIDTH_IN, 7.6), layout="constrained")
    top, mid, bottom = fig.subfigures(3, 1, height_ratios=[2.2, 2.9, 2.5])
    axes = top.subplots(1, len(low), sharey=False)
    for ax, j in zip(axes, low):
        s = a.settings[j]
        ex = example_context(cfg, s, cfg["eval_seed"], cfg["n_window"])
        ax.plot(np.degrees(ex["grid"]), ex["f_grid"], color=styles[j]["color"], lw=1.2, label="$f$ (the task)")
        ax.scatter(np.degrees(ex["angle"]), ex["y"], s=5, color="0.45", label="context labels")
        ax.scatter([0], [ex["f_q"]], marker="*", s=70, color="k", zorder=3, label="query")
        ax.set(title=s.label, xlim=(-180, 180), xticks=[-180, 0, 180], xlabel="angle (degrees)")
    axes[0].set_ylabel("label")
    top.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=3)
    axes = mid.subplots(1, 2, sharey=True)
    _draw_windows(axes, run, a, results)
    mid.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=2,
               title="setting (softmax window's half-width)")
    axes = bottom.subplots(1, len(low), sharey=False)
    for ax, j in zip(axes, low):
        for m in MODELS:
            plotting.band(ax, a.n, a.error[m][0, j], MODEL_COLORS[m], label=f"{m} attention", marker="o", ms=3)
        ax.plot(a.n, a.mean_error("oracle")[0, j], "k--", lw=1, label="tuned NW window")
        ax.set(xscale="log", title=a.settings[j].label, xlabel="context length n")
        plotting.value_ticks(ax, a.n[::2])
        plotting.log_axis(ax)
    axes[0].set_ylabel("ICL error (MSE)")
    bottom.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=3)
    return fig


def plot_tasks(run: Run, a: WindowAnalysis):
    """One task of each setting (the paper's family, d = 2): f along the circle, the noisy context labels and the
    query, against the angle to the query (n = ``n_window``)."""
    cfg = run.cfg
    fig, axes = plotting.subplots(2, 2, row_height=2.5, sharex=True)
    for ax, s in zip(axes.flat, a.settings):
        ex = example_context(cfg, s, cfg["eval_seed"], cfg["n_window"])
        ax.plot(np.degrees(ex["grid"]), ex["f_grid"], color="0.2", lw=1.2, label="$f$ (the task)")
        ax.scatter(np.degrees(ex["angle"]), ex["y"], s=8, color="0.45", label="context labels yᵢ")
        ax.scatter([0], [ex["f_q"]], marker="*", s=90, color="k", zorder=3, label=r"query $f(x_q)$")
        ax.set(title=s.label, ylabel="label", xlim=(-180, 180), xticks=[-180, -90, 0, 90, 180])
    for ax in axes[-1]:
        ax.set_xlabel(ANGLE_LABEL)
    plotting.figure_legend(fig)
    return fig


def plot_error(run: Run, a: WindowAnalysis):
    """ICL error against the context length n: one row per setting, the paper's tasks (left) and the same tasks
    less their mean (right); softmax and linear units (seed mean, min-max band), the best-bandwidth Nadaraya-Watson
    predictor of each setting and the one window shared by all settings (seed means of each seed's tuned windows)."""
    fig, axes = plotting.subplots(len(a.settings), 2, row_height=1.75, sharex=True)
    for i, s in enumerate(a.settings):
        for k, fam in enumerate(FAMILY_LABEL):
            ax = axes[i, k]
            for m in MODELS:
                plotting.band(ax, a.n, a.error[m][k, i], MODEL_COLORS[m], label=f"{m} attention", marker="o",
                              ms=3)
            ax.plot(a.n, a.mean_error("oracle")[k, i], "k--", lw=1, label="best-bandwidth NW (per setting)")
            ax.plot(a.n, a.mean_error("fixed")[k, i], ":", color="0.45", lw=1, label="one NW window for all settings")
            ax.set(xscale="log", title=f"{s.label}, {fam}")
            plotting.value_ticks(ax, a.n)
            plotting.log_axis(ax)
        axes[i, 0].set_ylabel("ICL error (MSE)")
    for ax in axes[-1]:
        ax.set_xlabel("context length n")
    plotting.figure_legend(fig)
    return fig


def plot_training(run: Run, results: dict[str, SweepResult]):
    """||M||_2 during pretraining for each setting (units at n_window, paper's tasks, seed mean)."""
    sets = settings(run.cfg)
    fig, axes = plotting.subplots(1, 2, sharex=True, sharey=True)
    for ax, m in zip(axes[0], MODELS):
        res = results[m]
        for s, style in zip(sets, setting_styles(sets)):
            idx = unit_index(res, s, run.cfg["n_window"], run.cfg["function_class"])
            ax.plot(res.log_steps, spectral_norm(res.M_history[:, idx]).mean(1), label=s.label, **style)
        ax.set(title=f"{m} attention", xlabel="pretraining step")
        plotting.log_axis(ax)
    axes[0, 0].set_ylabel("‖M‖₂")
    plotting.figure_legend(fig, ncols=2)
    return fig
