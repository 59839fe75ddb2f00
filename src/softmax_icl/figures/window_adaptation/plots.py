"""Window adaptation: the figure's plots (plots only: nothing here is cached)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from ...base import derive_seed
from ...metrics import spectral_norm
from ...models import attention_weights
from ...plotting import MODEL_COLORS
from ...records import Run
from ...tasks import InputSpec, draw_raw, evaluate_class
from ...training import SweepResult
from .analysis import WindowAnalysis
from .sweeps import MODELS, Setting, settings, unit_index


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
    return dict(angle=angle.numpy(), y=y.numpy(), f_q=float(f[n]), grid=grid, f_grid=f_grid.numpy(), x=x[:n], xq=xq)


def plot_figure(run: Run, a: WindowAnalysis, results: dict[str, SweepResult]):
    cfg = run.cfg
    sets = a.settings
    fig, axes = plt.subplots(4, len(sets), figsize=(3.3 * len(sets), 11.0))
    n_w = cfg["n_window"]
    for j, s in enumerate(sets):
        ex = example_context(cfg, s, cfg["eval_seed"], n_w)
        ax = axes[0, j]
        ax.plot(np.degrees(ex["grid"]), ex["f_grid"], color="0.3", lw=1, label="f")
        ax.scatter(np.degrees(ex["angle"]), ex["y"], s=9, color="0.55", label="context $y_i$")
        ax.scatter([0], [ex["f_q"]], marker="*", s=120, color="k", zorder=3, label="query")
        ax.set(title=s.label, xlabel="angle to query (degrees)", ylabel="label", xlim=(-180, 180))
        ax = axes[1, j]
        for m in MODELS:
            res = results[m]
            i = unit_index(res, s, n_w, a.families[0])[0]
            M = torch.tensor(res.M[i : i + 1], dtype=torch.float32)
            wts = attention_weights(m, ex["x"][None, None], ex["xq"][None, None], M[None])[0, 0, 0].numpy()
            order = np.argsort(ex["angle"])
            ax.plot(np.degrees(ex["angle"][order]), wts[order] / np.abs(wts).max(), "o-", ms=2.5, lw=0.8,
                    color=MODEL_COLORS[m], label=f"{m} (half-width {a.halfwidth[m][0, j].mean():.0f}°)")
        ax.axhline(0, color="0.7", lw=0.6)
        ax.set(xlabel="angle to query (degrees)", ylabel="attention weight / max", xlim=(-180, 180), ylim=(-1.05, 1.1))
        ax.legend(loc="lower center", fontsize="x-small")
        for k, fam in enumerate(a.families):
            ax = axes[2 + k, j]
            for m in MODELS:
                e = a.error[m][k, j]
                ax.plot(a.n, e.mean(-1), "o-", color=MODEL_COLORS[m], label=f"{m} attention")
                if e.shape[-1] > 1:
                    ax.fill_between(a.n, e.min(-1), e.max(-1), color=MODEL_COLORS[m], alpha=0.2, lw=0)
            ax.plot(a.n, a.oracle[k, j], "k--", lw=1, label="best-bandwidth NW")
            ax.set(xscale="log", yscale="log", xlabel="context length n", ylabel=f"ICL error, {fam}")
            ax.set_xticks(a.n, [str(n) for n in a.n])
            ax.minorticks_off()
    axes[0, 0].legend(loc="best", fontsize="x-small")
    axes[2, 0].legend(loc="best", fontsize="x-small")
    fig.suptitle(f"Top: one task per setting. Middle: attention weights of pretrained units (n = {n_w}). "
                 f"Bottom rows: ICL error vs n on the paper's tasks ({a.families[0]}) and on the same tasks less their mean "
                 f"({a.families[1]}) (band: min-max over seeds)", fontsize="small")
    return fig


def plot_training(run: Run, results: dict[str, SweepResult]):
    """||M|| during pretraining for each setting (units at n_window)."""
    sets = settings(run.cfg)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharex=True)
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(sets)))
    for ax, m in zip(axes, MODELS):
        res = results[m]
        for s, c in zip(sets, colors):
            idx = unit_index(res, s, run.cfg["n_window"], run.cfg["function_class"])
            norms = spectral_norm(res.M_history[:, idx])
            ax.plot(res.log_steps, norms.mean(1), color=c, label=s.label)
        ax.set(title=f"{m} attention", xlabel="pretraining step", ylabel="‖M‖₂", yscale="log")
    axes[0].legend(fontsize="x-small")
    return fig
